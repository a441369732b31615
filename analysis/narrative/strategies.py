"""Computed sentences about the strategies of notebook 02 (and the sampler of notebook 03):
what the trade-off between padding and mixing is on *these* data, and which batching to use.

Every sentence that states a fact about the data is computed here from a
:func:`analysis.compare_strategies` table, so a notebook re-run on other data never states a
fact of the bundled data ("the efficient ones keep batches of look-alike lengths" is false
where packing is 99.6% efficient and mixes more than buckets).  Mixing is the within-batch
length CV (``within_batch_cv``: 0 for look-alike lengths, more for mixed batches).  Numbers
are written by :mod:`analysis.tables`.
"""

from __future__ import annotations

import pandas as pd

from analysis.tables import format_count, format_percent, format_value

__all__ = ["describe_tradeoff", "describe_choice", "describe_sampler_data"]


def _and(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _pct(share: float) -> str:
    return format_percent(share, 1)


def _cv(value: float) -> str:
    return format_value(value)


def _column(table: pd.DataFrame, name: str) -> dict[str, float]:
    """A column of the table by strategy, as floats."""
    return {str(k): float(v) for k, v in table[name].astype(float).items()}


def _dominates(eff: dict[str, float], cv: dict[str, float], a: str, b: str) -> bool:
    """Whether ``a`` is at least as efficient and as mixed as ``b``, and more of one."""
    return eff[a] >= eff[b] and cv[a] >= cv[b] and (eff[a] > eff[b] or cv[a] > cv[b])


def describe_tradeoff(table: pd.DataFrame) -> str:
    """Padding against mixing on these data: whether one strategy is best on both, where the
    bucketed shuffle stands, and which strategies beat it on both.

    Parameters
    ----------
    table : pandas.DataFrame
        A :func:`analysis.compare_strategies` table (``efficiency``, ``within_batch_cv``,
        ``lag1_autocorr``, ``composition_repeat``, one row per strategy).

    Examples
    --------
    >>> table = pd.DataFrame(
    ...     {"efficiency": [0.999, 0.38, 0.91, 0.996], "within_batch_cv": [0.01, 0.8, 0.2, 0.6],
    ...      "lag1_autocorr": [0.99, 0.0, 0.001, 0.0], "composition_repeat": [1.0, 0.0, 0.0, 0.0]},
    ...     index=["sorted", "random", "bucketed", "packing"])
    >>> print(describe_tradeoff(table))  # doctest: +NORMALIZE_WHITESPACE
    No strategy is best on both axes here: the most efficient, sorted (99.9%), mixes lengths
    least (within-batch CV 0.010), and the most mixed, random (CV 0.800), is 38.0% efficient.
    The bucketed shuffle is 91.0% efficient with within-batch CV 0.200, less efficient than
    sorting; packing is both more efficient and more mixed than it here. Its batches follow
    each other with a lag-1 length autocorrelation of 0.001 (sorted: 0.990), and 0.0% of its
    batch compositions repeat an earlier epoch's.
    """
    eff, cv = _column(table, "efficiency"), _column(table, "within_batch_cv")
    best, mixed = max(eff, key=eff.__getitem__), max(cv, key=cv.__getitem__)
    if all(_dominates(eff, cv, best, s) for s in eff if s != best):
        parts = [
            f"{best} is best on both axes here: the most efficient ({_pct(eff[best])}) and the "
            f"most mixed (within-batch CV {_cv(cv[best])})."
        ]
    else:
        word = "least" if cv[best] == min(cv.values()) else "less"
        parts = [
            f"No strategy is best on both axes here: the most efficient, {best} "
            f"({_pct(eff[best])}), mixes lengths {word} (within-batch CV {_cv(cv[best])}), and "
            f"the most mixed, {mixed} (CV {_cv(cv[mixed])}), is {_pct(eff[mixed])} efficient."
        ]
    if "bucketed" in eff:
        b = "bucketed"
        text = f"The bucketed shuffle is {_pct(eff[b])} efficient with within-batch CV {_cv(cv[b])}"
        if "sorted" in eff:
            text += ", less efficient than sorting" if eff[b] < eff["sorted"] else ", as efficient as sorting"
        better = [s for s in eff if s != b and _dominates(eff, cv, s, b)]
        if better:
            verb = "is" if len(better) == 1 else "are"
            text += f"; {_and(better)} {verb} both more efficient and more mixed than it here."
        else:
            text += "; no strategy here is both more efficient and more mixed."
        parts.append(text)
        if {"lag1_autocorr", "composition_repeat"} <= set(table.columns):
            lags, repeats = _column(table, "lag1_autocorr"), _column(table, "composition_repeat")
            lag = _cv(lags[b]) + (f" (sorted: {_cv(lags['sorted'])})" if "sorted" in lags else "")
            parts.append(
                f"Its batches follow each other with a lag-1 length autocorrelation of {lag}, and "
                f"{_pct(repeats[b])} of its batch compositions repeat an "
                "earlier epoch's."
            )
    return " ".join(parts)


def describe_choice(table: pd.DataFrame) -> str:
    """Which batching to use, in numbers of these data: what packing pads (when the model
    can train on packed sequences), else what the bucketed shuffle pads against a full one.

    Examples
    --------
    >>> table = pd.DataFrame({"efficiency": [0.38, 0.91, 0.996], "composition_repeat": [0, 0, 0.0]},
    ...                      index=["random", "bucketed", "packing"])
    >>> print(describe_choice(table))  # doctest: +NORMALIZE_WHITESPACE
    If your model can train on packed sequences (attention kept within each sample), packing
    pads 0.4% of its tokens here (99.6% efficient). Otherwise a bucketed shuffle with edges
    fitted to your histogram pads 9.0% of its tokens, against 62.0% for a full shuffle (6.1%
    of the full shuffle's padding per useful token), and draws new batches every epoch (0.0% of
    its compositions repeat).
    """
    eff = _column(table, "efficiency")
    parts = []
    if "packing" in eff:
        pad = 1 - eff["packing"]
        padded = f"pads {_pct(pad)} of its tokens" if pad > 0 else "pads nothing"
        parts.append(
            "If your model can train on packed sequences (attention kept within each sample), "
            f"packing {padded} here ({_pct(eff['packing'])} efficient)."
        )
    if "bucketed" in eff:
        text = (
            f"{'Otherwise a' if parts else 'A'} bucketed shuffle with edges fitted to your "
            f"histogram pads {_pct(1 - eff['bucketed'])} of its tokens"
        )
        if "random" in eff:
            waste_b, waste_r = 1 / eff["bucketed"] - 1, 1 / eff["random"] - 1
            text += f", against {_pct(1 - eff['random'])} for a full shuffle"
            if waste_r > 0:
                text += f" ({_pct(waste_b / waste_r)} of the full shuffle's padding per useful token)"
        if "composition_repeat" in table.columns:
            repeat = _pct(_column(table, "composition_repeat")["bucketed"])
            text += f", and draws new batches every epoch ({repeat} of its compositions repeat)"
        parts.append(text + ".")
    return " ".join(parts)


def describe_sampler_data(simulated: int, population: int) -> str:
    """Which samples a per-sample face (the sampler shown in notebook 03) runs on: all of them,
    or the uniform subsample a simulation of a huge histogram draws
    (:func:`analysis.simulation.epochs.simulation_sample`).

    Examples
    --------
    >>> describe_sampler_data(1_000, 1_000)
    'The sampler below runs on all 1,000 samples.'
    >>> print(describe_sampler_data(1_000_000, 10**12))  # doctest: +NORMALIZE_WHITESPACE
    The sampler below runs on a uniform subsample of 1,000,000 of the 1,000,000,000,000
    samples (their per-sample lengths would take 8,000,000,000,000 bytes); its counts are the
    subsample's.
    """
    if simulated >= population:
        return f"The sampler below runs on all {format_count(population)} samples."
    return (
        f"The sampler below runs on a uniform subsample of {format_count(simulated)} of the "
        f"{format_count(population)} samples (their per-sample lengths would take "
        f"{format_count(8 * population)} bytes); its counts are the subsample's."
    )
