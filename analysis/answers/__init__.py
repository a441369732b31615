"""What a design review reads, composed from the engine: the recommendation (which plan, which K:
:mod:`~analysis.answers.recommendation`), the padding-mixing trade-off and the plan at a floor
(:mod:`~analysis.answers.frontier`), tokens/s of every strategy on your hardware
(:mod:`~analysis.answers.throughput`), pack or pad (:mod:`~analysis.answers.pack_or_pad`) and
every strategy's gradient noise per window of steps (:mod:`~analysis.answers.gradient_noise`).
"""
