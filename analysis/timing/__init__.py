"""What a step costs in seconds: the shape of a training step (:mod:`~analysis.timing.shapes`),
the step-time model fitted to measured steps (:mod:`~analysis.timing.step_time`), the one
price of a batch, padded or packed, that every prediction uses (:mod:`~analysis.timing.price`), the
proportional rule that scales a measured tokens/s by efficiency
(:mod:`~analysis.timing.proportional`), the exact expected seconds of a closed-form epoch
(:mod:`~analysis.timing.epoch`), and beside them the gradient-noise model fitted to gradients
measured on your model (:mod:`~analysis.timing.noise`): what a plan costs in training steps.

Below the simulator and the optimiser, which both price with it; the tokens/s tables of every
strategy, built on simulated epochs, are :mod:`analysis.answers.throughput`'s.
"""
