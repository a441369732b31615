"""Sentences about the strategies of notebook 02 (and the sampler of notebook 03): how close the
simulation is to the exact expectations, which strategy pads least, and which batching to use.

Every sentence that states a fact about the data reads a :func:`analysis.compare_strategies`
table, so a notebook re-run on other data never states a fact of the bundled data.  The
trade-off between padding and mixing (the share of the length variance a batch keeps) is told
once, by :mod:`analysis.narrative.frontier`.  Numbers are written by :mod:`analysis.tables`.
"""

from __future__ import annotations

import pandas as pd

from analysis.tables import format_bound, format_count, format_percent

__all__ = ["describe_simulation", "describe_subsample", "describe_choice", "describe_sampler_data"]


def _names(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _column(table: pd.DataFrame, name: str) -> dict[str, float]:
    """A column of the table by strategy, as floats."""
    return {str(k): float(v) for k, v in table[name].astype(float).items()}


def describe_simulation(table: pd.DataFrame, epochs: int) -> str:
    """How far the simulated efficiency is from the exact expectation (a
    :func:`analysis.compare_strategies` table), and which strategies waste least.

    Examples
    --------
    >>> table = pd.DataFrame({"efficiency": [0.99, 0.6, 0.9], "expected_efficiency":
    ...                       [0.99, 0.61, float("nan")]}, index=["sorted", "random", "packing"])
    >>> print(describe_simulation(table, 3))
        Over 3 simulated epochs, the simulated efficiency is within 1.00 points of the exact
    expectation for sorted and random. Least padding: sorted (99.0%); most: random (60.0%).
    >>> table["batch_rule"] = ["batch_size 5", "batch_size 5", "max_tokens 4,096"]
    >>> text = describe_simulation(table, 3)
    >>> print(text[text.index("The strategies") :])
    The strategies ran under different batch rules (the `batch_rule` column): batch_size 5 for
    sorted and random; max_tokens 4,096 for packing. A step holds a different number of samples
    under each, so steps per epoch compare the rules as much as the padding; efficiency compares
    them like with like. Least padding: sorted (99.0%); most: random (60.0%).
    """
    both = table.dropna(subset=["expected_efficiency"])
    parts = []
    if len(both):
        gap = float((both["efficiency"] - both["expected_efficiency"]).abs().max())
        names = " and ".join(
            [", ".join(both.index[:-1]), both.index[-1]] if len(both) > 1 else list(both.index)
        )
        parts.append(
            f"Over {epochs} simulated epoch{'s' if epochs != 1 else ''}, the simulated "
            f"efficiency is within {format_bound(100 * gap)} points of the exact expectation for "
            f"{names}."
        )
    if "simulated_samples" in table.columns:
        parts.append(
            f"The data hold {table.attrs.get('population_samples', 0):,} samples: each "
            f"strategy was simulated on a uniform subsample of "
            f"{int(table['simulated_samples'].iloc[0]):,}, which leaves a standard error "
            f"of up to {format_bound(100 * float(table['efficiency_se'].max()))} points on the "
            f"simulated efficiency (the exact expectations are for the full data)."
        )
    if "batch_rule" in table.columns and table["batch_rule"].nunique() > 1:
        by_rule = table.groupby("batch_rule", sort=False).groups
        rules = "; ".join(f"{rule} for {_names(list(map(str, names)))}" for rule, names in by_rule.items())
        parts.append(
            f"The strategies ran under different batch rules (the `batch_rule` column): {rules}. "
            "A step holds a different number of samples under each, so steps per epoch compare "
            "the rules as much as the padding; efficiency compares them like with like."
        )
    efficiency = dict(zip(map(str, table.index), table["efficiency"].astype(float), strict=True))
    best, worst = max(efficiency, key=efficiency.__getitem__), min(efficiency, key=efficiency.__getitem__)
    parts.append(
        f"Least padding: {best} ({format_percent(efficiency[best], 'prose')}); most: {worst} "
        f"({format_percent(efficiency[worst], 'prose')})."
    )
    return " ".join(parts)


def describe_subsample(table: pd.DataFrame) -> str:
    """Which samples a :func:`analysis.compare_strategies` table simulated when the data were too
    many to expand (its ``simulated_samples`` column; the population in its ``attrs``).

    Examples
    --------
    >>> table = pd.DataFrame({"simulated_samples": [1_000_000]})
    >>> table.attrs["population_samples"] = 10**12
    >>> print(describe_subsample(table))
        simulated on a uniform subsample of 1,000,000 of the 1,000,000,000,000 samples, its batches,
    steps and waste_tokens scaled to the data's epoch; efficiency_se is the standard error this
    leaves; expected_efficiency is exact
    """
    return (
        f"simulated on a uniform subsample of {format_count(int(table['simulated_samples'].iloc[0]))} "
        f"of the {format_count(int(table.attrs['population_samples']))} samples, its batches, steps "
        "and waste_tokens scaled to the data's epoch; efficiency_se is the standard error this "
        "leaves; expected_efficiency is exact"
    )


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
        padded = f"pads {format_percent(pad, 'prose')} of its tokens" if pad > 0 else "pads nothing"
        parts.append(
            "If your model can train on packed sequences (attention kept within each sample), "
            f"packing {padded} here ({format_percent(eff['packing'], 'prose')} efficient)."
        )
    if "bucketed" in eff:
        text = (
            f"{'Otherwise a' if parts else 'A'} bucketed shuffle with edges fitted to your "
            f"histogram pads {format_percent(1 - eff['bucketed'], 'prose')} of its tokens"
        )
        if "random" in eff:
            waste_b, waste_r = 1 / eff["bucketed"] - 1, 1 / eff["random"] - 1
            text += f", against {format_percent(1 - eff['random'], 'prose')} for a full shuffle"
            if waste_r > 0:
                share = format_percent(waste_b / waste_r, "prose")
                text += f" ({share} of the full shuffle's padding per useful token)"
        if "composition_repeat" in table.columns:
            repeat = format_percent(_column(table, "composition_repeat")["bucketed"], "prose")
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
