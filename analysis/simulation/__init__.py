"""Real epochs of index batches, simulated and measured: the bucketed shuffle's pure core that the
training sampler runs too (:mod:`~analysis.simulation.bucketed`), every strategy's epoch builder
(:mod:`~analysis.simulation.strategies`), the metrics of simulated batches and epochs
(:mod:`~analysis.simulation.metrics`) and :func:`~analysis.simulation.epochs.simulate` /
:func:`~analysis.simulation.epochs.compare_strategies` (:mod:`~analysis.simulation.epochs`).

Per-sample arrays live here and in the sampler only; a huge histogram is subsampled, and says so.
"""
