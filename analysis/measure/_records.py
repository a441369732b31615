"""One record's checks: a sample's text or conversation, its field, its size, its Unicode.

Every reader of :mod:`analysis.measure._pieces` passes what it read through these, so a
record is refused in the same words whatever its format: a one-line ``ValueError`` that
begins with ``where`` (the file and the line or row).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

#: Samples encoded per call of the tokenizer's batch API.
BATCH = 1024
#: The largest record read: a JSONL line, a CSV/TSV record, a plain-text file, a Parquet or
#: dataset value (bytes; characters for an in-memory string), or a rendered conversation.
#: Tokenizing text takes over 100 times its size in memory (the tokenizer's per-token
#: records: one 12 MiB JSONL record peaked at 1.6 GB, a 100 MB one at 7.3 GB), so a larger
#: one is refused in one line rather than risking the machine.
MAX_RECORD_BYTES = 8 << 20


def too_large(where: str, size: int, what: str = "record") -> ValueError:
    return ValueError(
        f"{where}a {what} of {size:,} bytes, over the {MAX_RECORD_BYTES:,}-byte limit "
        "(MAX_RECORD_BYTES); split it or leave it out"
    )


def check_unicode(values: list[Any], where: Callable[[int], str]) -> None:
    """Refuse strings the tokenizer cannot take: a lone surrogate (JSON's ``"\\ud800"``)."""
    texts = [v for v in values if type(v) is str]
    try:
        "".join(texts).encode("utf-8")
        return
    except UnicodeEncodeError:
        pass
    for i, v in enumerate(values):
        if type(v) is str:
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as err:
                raise ValueError(
                    f"{where(i)}a lone surrogate {v[err.start]!r} at character {err.start}; not Unicode text"
                ) from None


# ---------------------------------------------------------------------------- one sample
def check_value(value: Any, chat: bool, where: str, name: str | None) -> Any:
    """A sample's text (a ``str``) or conversation (a list of role/content messages)."""
    label = "the sample" if name is None else f"field {name!r}"
    if not chat:
        if isinstance(value, str):
            return value
        raise ValueError(f"{where}{label} is {describe(value)}; expected a string")
    if not isinstance(value, list):
        raise ValueError(
            f"{where}{label} is {describe(value)}; expected a list of {{'role', 'content'}} messages"
        )
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            raise ValueError(
                f"{where}message {i} of {label} is {describe(message)}; expected "
                "an object with 'role' and 'content'"
            )
        for key in ("role", "content"):
            if message.get(key) is None:
                raise ValueError(f"{where}message {i} of {label} has no {key!r}")
    return value


def describe(value: Any) -> str:
    try:
        shown = json.dumps(value, default=repr)
    except (RecursionError, ValueError):
        shown = "nested too deeply to show"
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    kind = {
        bool: "a bool",
        type(None): "null",
        str: "a string",
        dict: "an object",
        list: "a list",
        int: "an integer",
        float: "a number",
    }.get(type(value), type(value).__name__)
    return f"{kind} ({shown})"


def field_of(obj: Any, name: str | None, where: str) -> Any:
    """``obj[name]`` of a record; with ``name=None`` a string itself or a one-field record."""
    if name is None:
        if isinstance(obj, dict):
            if len(obj) == 1:
                return next(iter(obj.values()))
            raise ValueError(
                f"{where}{len(obj)} fields ({', '.join(map(str, obj))}); pass "
                "field= (text) or chat_field= (messages)"
            )
        return obj
    if not isinstance(obj, dict):
        raise ValueError(f"{where}expected a record with field {name!r}, got {describe(obj)}")
    try:
        return obj[name]
    except KeyError:
        raise ValueError(f"{where}no field {name!r}; fields: {', '.join(map(str, obj))}") from None


def arrow_values(column: Any, path: str, first_row: int) -> list[Any]:
    """An Arrow column's values as Python objects (dictionary-encoded ones decoded), every
    string value (a text or a message's content) checked against :data:`MAX_RECORD_BYTES`
    before it is copied out."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    flat = column
    while pa.types.is_list(flat.type) or pa.types.is_large_list(flat.type):
        flat = flat.flatten()
    if pa.types.is_struct(flat.type):
        # a conversation: its messages' string fields; sizes summed over each row below
        strings = [flat.field(i) for i in range(flat.type.num_fields)]
    else:
        strings = [flat]
    for values in strings:
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
            continue
        sizes = pc.binary_length(values)
        if len(sizes) and (pc.max(sizes).as_py() or 0) > MAX_RECORD_BYTES:
            i = int(np.argmax(sizes.fill_null(0).to_numpy()))
            row = first_row + i if values is column else first_row
            where = f"{path}: row {row}: " if values is column else f"{path}: near row {row}: "
            raise too_large(where, int(sizes[i].as_py()), "value")
    return list(column.to_pylist())
