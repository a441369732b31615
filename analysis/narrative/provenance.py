"""Sentences about where a report's numbers come from: which K it used and why (the user's
``--buckets``, the gain rule's suggestion, or the bundled case's K), and what raw data and
tokenizer its lengths were measured from.  Each reads values and computes nothing."""

from __future__ import annotations

__all__ = ["describe_default_k", "describe_k_choice", "describe_measurement"]


def describe_k_choice(k: int, asked: int | str | None, suggested: int, *, case: bool = False) -> str:
    """Which number of buckets K a report uses, and why, in one sentence.

    ``asked``: ``--buckets`` as given (a K, ``"auto"``, or ``None`` when not given); ``suggested``:
    the gain rule's K (:attr:`analysis.Recommendation.n_buckets_suggested`); ``case``: the data
    are the bundled case's, whose page compares the plan with the case's own K.

    Examples
    --------
    >>> describe_k_choice(8, None, 8)
    'K = 8 buckets, the gain rule suggests it (no --buckets given; --buckets K sets another).'
    >>> print(describe_k_choice(6, None, 9, case=True))  # doctest: +NORMALIZE_WHITESPACE
    K = 6 buckets, the K the case ran (the bundled case data, shown beside the case's published
    edges); the gain rule suggests K = 9 (--buckets auto).
    >>> describe_k_choice(4, 4, 4)
    'K = 4 buckets, as --buckets asked; the gain rule suggests the same K.'
    >>> describe_k_choice(3, "auto", 3)
    'K = 3 buckets, the gain rule suggests it (--buckets auto).'
    """
    buckets = f"K = {k} bucket{'' if k == 1 else 's'}"
    if asked is None and not case:
        return f"{buckets}, the gain rule suggests it (no --buckets given; --buckets K sets another)."
    if asked == "auto":
        return f"{buckets}, the gain rule suggests it (--buckets auto)."
    why = (
        "the K the case ran (the bundled case data, shown beside the case's published edges)"
        if asked is None
        else "as --buckets asked"
    )
    other = "the same K" if suggested == k else f"K = {suggested} (--buckets auto)"
    return f"{buckets}, {why}; the gain rule suggests {other}."


def describe_measurement(
    source: str,
    tokenizer: str,
    tokenizer_sha256: str,
    *,
    field: str | None,
    chat_field: str | None,
    lengths_file: str,
) -> str:
    """What a report's lengths were measured from, in one sentence.

    Examples
    --------
    >>> describe_measurement("chats.jsonl", "tok/", "ab" * 32, field=None, chat_field="messages",
    ...                      lengths_file="lengths.npy")  # doctest: +NORMALIZE_WHITESPACE
    "Token lengths of chats.jsonl, field 'messages' counted with the tokenizer's chat template,
    measured with the tokenizer tok/ (SHA-256 abababababab...) into lengths.npy."
    """
    if chat_field is not None:
        what = f", field {chat_field!r} counted with the tokenizer's chat template"
    elif field is not None:
        what = f", field {field!r}"
    else:
        what = ""
    return (
        f"Token lengths of {source}{what}, measured with the tokenizer {tokenizer} "
        f"(SHA-256 {tokenizer_sha256[:12]}...) into {lengths_file}."
    )


def describe_default_k(k: int, default: int) -> str:
    """What the default K became on data with fewer distinct lengths than ``default``.

    Examples
    --------
    >>> print(describe_default_k(3, 6))  # doctest: +NORMALIZE_WHITESPACE
    (K = 3: the default 6 buckets exceed the data's 3 distinct lengths; --buckets auto takes the K
    the gain rule suggests)
    """
    return (
        f"(K = {k}: the default {default} buckets exceed the data's {k} distinct "
        f"length{'' if k == 1 else 's'}; --buckets auto takes the K the gain rule suggests)"
    )
