"""What an epoch costs in padding, exactly, from the histogram: the expected padded tokens and
steps of the closed-form strategies (:mod:`~analysis.padding.waste`), the order statistics
behind them (:mod:`~analysis.padding.order_stats`) and the one definition of *mixing*, the share
of the data's length variance a batch keeps (:mod:`~analysis.padding.mixing`).

Pure functions of a :class:`~analysis.lengths.LengthHistogram` and a
:class:`~analysis.batching.BatchRule`; nothing here reads a file or draws a random number.
"""
