"""measure_lengths: every source format and tokenizer kind against the tokenizer itself.

The tokenizer is built here, deterministically and offline: a small byte-level BPE trained
with ``tokenizers`` on generated lines, with BOS/EOS added by its post-processor, wrapped in a
``transformers`` fast tokenizer that carries a Jinja chat template.  Every expected length is
``len(tokenizer.encode(text))`` or the chat template's own count, sample by sample.  The same
on a Dask cluster: tests/integration/test_dask.py (with these fixtures).
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("transformers")

from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

from analysis import LengthHistogram, load_lengths, measure  # noqa: E402
from analysis.measure import _out, _sources, _tokenizer, measure_lengths  # noqa: E402

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}{% endfor %}"
)
WORDS = [
    "padding",
    "bucket",
    "token",
    "length",
    "batch",
    "edge",
    "the",
    "a",
    "of",
    "to",
    "naïve",
    "straße",
    "数据",
    "λ",
    "x",
    "tokenizer",
    "chat",
    "sample",
    "shard",
    "row",
]


def make_texts(n: int, seed: int) -> list[str]:
    """``n`` texts of 0 to 60 words drawn with a seeded generator (one is empty)."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 60)))) for _ in range(n)]
    texts[3] = ""
    return texts


def make_chats(n: int, seed: int) -> list[list[dict[str, str]]]:
    rng = np.random.default_rng(seed)
    texts = make_texts(3 * n, seed)
    return [
        [
            {"role": role, "content": texts[3 * i + j]}
            for j, role in enumerate(["system", "user", "assistant"][: 1 + int(rng.integers(3))])
        ]
        for i in range(n)
    ]


def train_tokenizer(vocab_size: int = 400) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        special_tokens=["<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(make_texts(3000, seed=7), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 1)]
    )
    return tok


@pytest.fixture(scope="module")
def bpe() -> Tokenizer:
    return train_tokenizer()


@pytest.fixture(scope="module")
def hf(bpe: Tokenizer) -> PreTrainedTokenizerFast:
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    tok.chat_template = CHAT_TEMPLATE
    return tok


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return make_texts(300, seed=1701)


@pytest.fixture(scope="module")
def expected(hf: PreTrainedTokenizerFast, texts: list[str]) -> np.ndarray:
    return np.array([len(hf.encode(t)) for t in texts])


def chat_count(hf: PreTrainedTokenizerFast, chat: list[dict[str, str]]) -> int:
    ids = hf.apply_chat_template(chat, tokenize=True)
    return len(ids["input_ids"] if hasattr(ids, "keys") else ids)


class TiktokenLike:
    """An object with tiktoken's batch API (no special tokens), backed by the test BPE."""

    def __init__(self, tok: Tokenizer) -> None:
        self.json = tok.to_str()

    def encode_ordinary_batch(self, texts: list[str]) -> list[list[int]]:
        tok = Tokenizer.from_str(self.json)
        return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def word_count(texts: list[str]) -> list[int]:
    """A callable tokenizer: words per text (module level, so it pickles)."""
    return [len(t.split()) for t in texts]


def measured(source: Any, tokenizer: Any, tmp_path: Path, **kw: Any) -> tuple[LengthHistogram, np.ndarray]:
    out = tmp_path / "lengths.npy"
    kw.setdefault("cache", False)
    hist = measure_lengths(source, tokenizer, out=out, **kw)
    return hist, np.load(out)


def check(hist: LengthHistogram, per_sample: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_array_equal(per_sample, expected)
    assert hist == LengthHistogram.from_lengths(expected, allow_zero=True)


# ---------------------------------------------------------------------------- sources
def write_jsonl(path: Path, records: list[Any]) -> Path:
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(lines)
    else:
        path.write_text(lines, encoding="utf-8")
    return path


def make_source(kind: str, texts: list[str], tmp: Path) -> tuple[Any, dict[str, Any]]:
    records = [{"id": i, "text": t} for i, t in enumerate(texts)]
    if kind == "jsonl":
        return write_jsonl(tmp / "docs.jsonl", records), {"field": "text"}
    if kind == "jsonl.gz shards":
        write_jsonl(tmp / "a.jsonl.gz", records[:120])
        write_jsonl(tmp / "b.jsonl.gz", records[120:])
        return str(tmp / "*.jsonl.gz"), {"field": "text"}
    if kind == "parquet row groups":
        path = tmp / "docs.parquet"
        pq.write_table(pa.table({"id": list(range(len(texts))), "text": texts}), path, row_group_size=70)
        return path, {"field": "text"}
    if kind in ("csv", "tsv"):
        import pandas as pd

        path = tmp / f"docs.{kind}"
        pd.DataFrame({"id": range(len(texts)), "text": texts}).to_csv(
            path, sep="," if kind == "csv" else "\t", index=False
        )
        return path, {"field": "text"}
    if kind == "text files":
        for i, t in enumerate(texts):
            sub = tmp / "src" / f"pkg{i % 3}"
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"m{i:03d}.py").write_text(t, encoding="utf-8")
        order = sorted(tmp.glob("src/**/*.py"))
        return str(tmp / "src" / "**" / "*.py"), {"_order": [int(p.stem[1:]) for p in order]}
    if kind == "directory of parquet shards":
        (tmp / "shards").mkdir()
        for i in range(3):
            part = texts[i * 100 : (i + 1) * 100]
            pq.write_table(pa.table({"text": part}), tmp / "shards" / f"part-{i}.parquet")
        return tmp / "shards", {}
    if kind in ("save_to_disk", "datasets.Dataset"):
        import datasets

        datasets.disable_progress_bars()
        ds = datasets.Dataset.from_dict({"text": texts, "id": list(range(len(texts)))})
        if kind == "datasets.Dataset":
            return ds, {"field": "text"}
        ds.save_to_disk(str(tmp / "ds"), max_shard_size="10KB")
        assert len(list((tmp / "ds").glob("*.arrow"))) > 1
        return tmp / "ds", {"field": "text"}
    if kind == "strings":
        return iter(texts), {}
    if kind == "records":
        return records, {"field": "text"}
    raise AssertionError(kind)


SOURCES = [
    "jsonl",
    "jsonl.gz shards",
    "parquet row groups",
    "csv",
    "tsv",
    "text files",
    "directory of parquet shards",
    "save_to_disk",
    "datasets.Dataset",
    "strings",
    "records",
]


@pytest.mark.parametrize("kind", SOURCES)
def test_every_source_format_gives_the_tokenizers_own_lengths(
    kind: str, bpe: Tokenizer, texts: list[str], expected: np.ndarray, tmp_path: Path
) -> None:
    source, kw = make_source(kind, texts, tmp_path)
    order = kw.pop("_order", None)
    hist, per_sample = measured(source, bpe, tmp_path, processes=1, **kw)
    check(hist, per_sample, expected if order is None else expected[order])


def test_jsonl_byte_ranges_keep_source_order_and_line_numbers(
    monkeypatch: pytest.MonkeyPatch, bpe: Tokenizer, texts: list[str], expected: np.ndarray, tmp_path: Path
) -> None:
    monkeypatch.setattr(_sources, "_SPLIT_BYTES", 1000)
    path = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in texts])
    plan, _ = _sources.plan_paths(path, "text", False, hashing=True)
    ranges = list(plan.pieces)
    assert len(ranges) > 5
    assert [r.first_line for r in ranges] == [1 + path.read_bytes()[: r.start].count(b"\n") for r in ranges]
    check(*measured(path, bpe, tmp_path, field="text", processes=1), expected)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[250] = '{"text": 7}\n'
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match=r"docs.jsonl: line 251: field 'text' is an integer"):
        measure_lengths(path, bpe, field="text", processes=1, cache=False)


def test_worker_processes_give_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
    hf: PreTrainedTokenizerFast,
    texts: list[str],
    expected: np.ndarray,
    tmp_path: Path,
) -> None:
    monkeypatch.setattr(_sources, "_SPLIT_BYTES", 2000)
    path = write_jsonl(
        tmp_path / "docs.jsonl",
        [{"text": t, "chat": c} for t, c in zip(texts, make_chats(300, 3), strict=True)],
    )
    check(*measured(path, hf, tmp_path, field="text", processes=2), expected)
    chats = [chat_count(hf, c) for c in make_chats(300, 3)]
    check(*measured(path, hf, tmp_path, chat_field="chat", processes=2), np.array(chats))


# ---------------------------------------------------------------------------- tokenizers
@pytest.mark.parametrize(
    "kind", ["tokenizer.json", "directory", "tokenizers", "transformers", "tiktoken", "callable"]
)
def test_every_tokenizer_kind(
    kind: str,
    bpe: Tokenizer,
    hf: PreTrainedTokenizerFast,
    texts: list[str],
    expected: np.ndarray,
    tmp_path: Path,
) -> None:
    tokenizer: Any = {
        "tokenizers": bpe,
        "transformers": hf,
        "tiktoken": TiktokenLike(bpe),
        "callable": word_count,
    }.get(kind)
    if kind == "tokenizer.json":
        bpe.save(str(tmp_path / "tokenizer.json"))
        tokenizer = tmp_path / "tokenizer.json"
    elif kind == "directory":
        hf.save_pretrained(tmp_path / "tok")
        tokenizer = str(tmp_path / "tok")
    want = {
        "tiktoken": np.array([len(bpe.encode(t, add_special_tokens=False)) for t in texts]),
        "callable": np.array(word_count(texts)),
    }.get(kind, expected)
    check(*measured(texts, tokenizer, tmp_path), want)


def test_add_special_tokens_false_and_empty_texts(bpe: Tokenizer, texts: list[str], tmp_path: Path) -> None:
    want = np.array([len(bpe.encode(t, add_special_tokens=False)) for t in texts])
    assert want[3] == 0
    hist, per_sample = measured(texts, bpe, tmp_path, add_special_tokens=False)
    check(hist, per_sample, want)
    assert hist.min == 0


def test_truncation_and_padding_settings_are_ignored(
    bpe: Tokenizer, texts: list[str], expected: np.ndarray, tmp_path: Path
) -> None:
    tok = Tokenizer.from_str(bpe.to_str())
    tok.enable_truncation(8)
    tok.enable_padding(length=64)
    check(*measured(texts, tok, tmp_path), expected)


# ---------------------------------------------------------------------------- chats
def test_chats_are_counted_with_the_chat_template(hf: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    chats = make_chats(120, seed=11)
    want = np.array([chat_count(hf, c) for c in chats])
    path = write_jsonl(tmp_path / "chats.jsonl", [{"messages": c} for c in chats])
    check(*measured(path, hf, tmp_path, chat_field="messages"), want)
    table = pa.table({"messages": chats})
    pq.write_table(table, tmp_path / "chats.parquet", row_group_size=50)
    check(*measured(tmp_path / "chats.parquet", hf, tmp_path, chat_field="messages"), want)
    hf.save_pretrained(tmp_path / "tok")
    check(*measured(path, tmp_path / "tok", tmp_path, chat_field="messages"), want)


def test_chat_errors(bpe: Tokenizer, hf: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    chats = make_chats(5, seed=2)
    path = write_jsonl(tmp_path / "chats.jsonl", [{"messages": c} for c in chats])
    plain = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>")
    with pytest.raises(ValueError, match="^tokenizer: has no chat template"):
        measure_lengths(path, plain, chat_field="messages", cache=False)
    with pytest.raises(ValueError, match="needs a transformers tokenizer"):
        measure_lengths(path, bpe, chat_field="messages", cache=False)
    chats[3][0] = {"role": "user"}
    write_jsonl(path, [{"messages": c} for c in chats])
    with pytest.raises(
        ValueError,
        match=r"chats.jsonl: line 4: message 0 of field 'messages' "
        r"has no 'content'$",
    ):
        measure_lengths(path, hf, chat_field="messages", cache=False)
    write_jsonl(path, [{"messages": "hello"}])
    with pytest.raises(
        ValueError,
        match=r"line 1: field 'messages' is a string \(\"hello\"\); "
        "expected a list",
    ):
        measure_lengths(path, hf, chat_field="messages", cache=False)


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("lines", "kw", "message"),
    [
        (
            ['{"text": "a"}', '{"txt": "b"}'],
            {"field": "text"},
            r"docs.jsonl: line 2: no field 'text'; fields: txt$",
        ),
        (
            ['{"text": "a"}', '{"text": null}'],
            {"field": "text"},
            r"docs.jsonl: line 2: field 'text' is null \(null\); expected a string$",
        ),
        (['{"text": "a"}', '{"text": "b"'], {"field": "text"}, r"docs.jsonl: line 2: not valid JSON \(.*\)$"),
        (['{"text": "a"}', "", '{"text": "b"}'], {"field": "text"}, r"docs.jsonl: line 2: blank line$"),
        (['["a"]'], {"field": "text"}, r"docs.jsonl: line 1: expected a JSON object"),
        (['{"text": "a", "id": 1}'], {}, r"docs.jsonl: line 1: 2 fields \(text, id\); pass field="),
    ],
)
def test_jsonl_errors_name_the_file_and_line(
    lines: list[str], kw: dict[str, Any], message: str, bpe: Tokenizer, tmp_path: Path
) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "lengths.npy"
    with pytest.raises(ValueError, match=message):
        measure_lengths(path, bpe, out=out, cache=False, **kw)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]  # no partial out


def test_table_and_file_errors(bpe: Tokenizer, tmp_path: Path) -> None:
    pq.write_table(pa.table({"text": ["a", None, "c"]}), tmp_path / "t.parquet")
    with pytest.raises(ValueError, match=r"t.parquet: row 1: missing value \(null\) in 'text'$"):
        measure_lengths(tmp_path / "t.parquet", bpe, cache=False)
    pq.write_table(pa.table({"n": [1, 2]}), tmp_path / "n.parquet")
    with pytest.raises(ValueError, match=r"n.parquet: column 'n' has type int64; expected strings"):
        measure_lengths(tmp_path / "n.parquet", bpe, cache=False)
    with pytest.raises(ValueError, match=r"t.parquet: no column 'body'; columns: text$"):
        measure_lengths(tmp_path / "t.parquet", bpe, field="body", cache=False)
    (tmp_path / "bad.txt").write_bytes(b"ok \xff")
    with pytest.raises(ValueError, match=r"bad.txt: not UTF-8 text \(byte 3\)$"):
        measure_lengths(tmp_path / "bad.txt", bpe, cache=False)
    with pytest.raises(ValueError, match=r"mixes parquet and text files"):
        measure_lengths(str(tmp_path / "*"), bpe, cache=False)
    with pytest.raises(ValueError, match=r"nothing.jsonl: no such file or directory$"):
        measure_lengths(tmp_path / "nothing.jsonl", bpe, cache=False)
    with pytest.raises(ValueError, match=r"missing.json: no such tokenizer file or directory$"):
        measure_lengths(["a"], tmp_path / "missing.json", cache=False)
    with pytest.raises(ValueError, match=r"^row 1: the sample is an integer \(5\); expected a"):
        measure_lengths(["a", 5], bpe, cache=False)
    with pytest.raises(ValueError, match="not both"):
        measure_lengths(["a"], bpe, field="a", chat_field="b")
    with pytest.raises(ValueError, match=r"out= must end in .npy or .parquet, or name a folder$"):
        measure_lengths(["a"], bpe, out=tmp_path / "x.csv")
    with pytest.raises(ValueError, match="cannot be pickled"):
        measure_lengths(["a"], lambda texts: [1] * len(texts), processes=2)
    with pytest.raises(ValueError, match=r"callable returned \(1,\) for 2 texts"):
        measure_lengths(["a", "b"], lambda texts: [1], cache=False)


# ---------------------------------------------------------------------------- out and cache
def test_parquet_out_has_sample_ids(
    bpe: Tokenizer, texts: list[str], expected: np.ndarray, tmp_path: Path
) -> None:
    out = tmp_path / "lengths.parquet"
    hist = measure_lengths(texts, bpe, out=out, cache=False)
    table = pq.read_table(out)
    assert table.column_names == ["sample_id", "length"]
    np.testing.assert_array_equal(table.column("sample_id").to_numpy(), np.arange(len(texts)))
    np.testing.assert_array_equal(table.column("length").to_numpy(), expected)
    assert load_lengths(out, column="length", allow_zero=True) == hist


def test_cache_hits_without_tokenizing_and_invalidates_on_change(
    monkeypatch: pytest.MonkeyPatch, bpe: Tokenizer, texts: list[str], expected: np.ndarray, tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()
    for i in range(3):
        write_jsonl(tmp_path / "data" / f"{i}.jsonl", [{"text": t} for t in texts[i::3]])
    source, cache_dir = str(tmp_path / "data" / "*.jsonl"), tmp_path / "cache"
    bpe.save(str(tmp_path / "tokenizer.json"))
    tok = tmp_path / "tokenizer.json"
    calls: list[int] = []
    real = _tokenizer.Encoder.texts

    def counting(self: Any, batch: list[str]) -> np.ndarray:
        calls.append(len(batch))
        return real(self, batch)

    monkeypatch.setattr(_tokenizer.Encoder, "texts", counting)

    def run(**kw: Any) -> LengthHistogram:
        calls.clear()
        return measure_lengths(source, tok, field="text", cache_dir=cache_dir, processes=1, **kw)

    first = run()
    assert sum(calls) == len(texts)
    assert run() == first and calls == []  # a hit: nothing tokenized
    out = tmp_path / "lengths.npy"
    run(out=out)  # per-sample lengths were not stored yet: measured again
    assert sum(calls) == len(texts)
    out.unlink()
    assert run(out=out) == first and calls == []
    order = np.concatenate([np.arange(i, len(texts), 3) for i in range(3)])
    np.testing.assert_array_equal(np.load(out), expected[order])
    assert run(add_special_tokens=False) != first  # another option: another entry

    shard = tmp_path / "data" / "1.jsonl"  # same size and mtime, other content: still a miss
    stat = shard.stat()
    data = shard.read_bytes()
    shard.write_bytes(data.replace(b"padding", b"paddinh"))
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    run()
    assert sum(calls) == len(texts)

    other = train_tokenizer(vocab_size=300)  # another tokenizer at the same path
    other.save(str(tok))
    changed = run()
    assert sum(calls) == len(texts)
    want = [
        len(other.encode(json.loads(line)["text"]))
        for i in range(3)
        for line in (tmp_path / "data" / f"{i}.jsonl").read_text().splitlines()
    ]
    assert changed == LengthHistogram.from_lengths(want, allow_zero=True)
    assert _tokenizer.tokenizer_spec(word_count, add_special_tokens=True, chat=False).digest is not None
    assert _tokenizer.tokenizer_spec(lambda t: t, add_special_tokens=True, chat=False).digest is None


def test_progress_wrapper_sees_every_piece(bpe: Tokenizer, texts: list[str], expected: np.ndarray) -> None:
    seen: list[tuple[int, int]] = []

    def wrapper(pieces: Any) -> Any:
        for piece in pieces:
            seen.append((piece.n_samples, piece.n_tokens))
            yield piece

    measure_lengths(texts * 30, bpe, progress=wrapper, cache=False, processes=1)
    assert len(seen) == 2  # 9,000 records: two pieces of at most 8,192
    assert sum(n for n, _ in seen) == 30 * len(texts)
    assert sum(t for _, t in seen) == 30 * int(expected.sum())


def folder_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def check_folder(folder: Path, hist: LengthHistogram, expected: np.ndarray) -> list[Path]:
    """An out folder: its sorted .npy files in source order, listed by index.json."""
    files = sorted(folder.glob("*.npy"))
    index = json.loads((folder / "index.json").read_text(encoding="utf-8"))
    counts = [np.load(p).size for p in files]
    assert [e["file"] for e in index["files"]] == [p.name for p in files]
    assert [e["n_samples"] for e in index["files"]] == counts
    assert [e["first_sample"] for e in index["files"]] == np.cumsum([0, *counts[:-1]]).tolist()
    assert index["n_samples"] == sum(counts)
    check(hist, np.concatenate([np.load(p) for p in files]), expected)
    assert load_lengths(str(folder / "*.npy"), allow_zero=True) == hist
    return files


def test_out_folder_has_one_file_per_shard_in_source_order(
    monkeypatch: pytest.MonkeyPatch, bpe: Tokenizer, texts: list[str], expected: np.ndarray, tmp_path: Path
) -> None:
    monkeypatch.setattr(_sources, "_SPLIT_BYTES", 5000)
    monkeypatch.setattr(_out, "_SHARD_DIGITS", 1)  # 11 shards: names widen to keep source order
    jsonl = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in texts])
    out, cache_dir = tmp_path / "lengths", tmp_path / "cache"
    out.mkdir()  # an earlier run's files are replaced
    (out / "7.npy").write_bytes(b"stale")
    (out / "index.json").write_text("{}")
    hist = measure_lengths(jsonl, bpe, field="text", out=out, processes=1, cache_dir=cache_dir)
    files = check_folder(out, hist, expected)
    assert len(files) > 10 and {len(p.stem) for p in files} == {2}

    def no_tokenizing(self: Any, batch: list[str]) -> np.ndarray:
        raise AssertionError("tokenized on a cache hit")

    monkeypatch.setattr(_tokenizer.Encoder, "texts", no_tokenizing)
    again = str(tmp_path / "again") + "/"  # a trailing separator: a folder
    assert measure_lengths(jsonl, bpe, field="text", out=again, cache_dir=cache_dir) == hist
    assert folder_files(tmp_path / "again") == folder_files(out)  # file for file, from the cache

    (out / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"lengths: holds 'notes.txt'; out= a folder must be"):
        measure_lengths(jsonl, bpe, field="text", out=out, cache_dir=cache_dir)


def test_spec_pickles_for_workers(hf: PreTrainedTokenizerFast, texts: list[str]) -> None:
    spec = _tokenizer.tokenizer_spec(hf, add_special_tokens=True, chat=True)
    encoder = _tokenizer.Encoder(pickle.loads(pickle.dumps(spec)))
    assert encoder.texts(texts[:5]).tolist() == [len(hf.encode(t)) for t in texts[:5]]


# ---------------------------------------------------------------------------- the cache, adversarially
def test_cache_keys_on_the_format(bpe: Tokenizer, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    texts = ["a b c", "d e"]
    jsonl = write_jsonl(tmp_path / "a.jsonl", [{"text": t} for t in texts])
    assert measure_lengths(jsonl, bpe, cache_dir=cache).n_samples == 2
    renamed = jsonl.rename(tmp_path / "a.txt")  # same bytes, size and mtime: one plain-text sample
    got = measure_lengths(renamed, bpe, cache_dir=cache)
    assert got == LengthHistogram.from_lengths([len(bpe.encode(renamed.read_text()).ids)])

    csv = tmp_path / "b.csv"
    csv.write_text("a\tb\nx y\tz w\n")  # CSV: one column "a\tb"; TSV: two columns
    assert measure_lengths(csv, bpe, cache_dir=cache).n_samples == 1
    tsv = csv.rename(tmp_path / "b.tsv")
    with pytest.raises(ValueError, match=r"b\.tsv: 2 columns \(a, b\)"):
        measure_lengths(tsv, bpe, cache_dir=cache)


def test_cache_keys_on_the_code_a_callable_runs(
    bpe: Tokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib
    import sys

    code = tmp_path / "code"
    code.mkdir()
    (code / "tokhelper.py").write_text("def split(text):\n    return text.split()\n")
    (code / "tokmod.py").write_text(
        "from tokhelper import split\n\n"
        "def count(texts):\n    out = []\n    for t in texts:\n"
        "        out.append(len(split(t)))\n    return out\n"
    )
    monkeypatch.syspath_prepend(str(code))
    for name in ("tokhelper", "tokmod"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    tokmod = importlib.import_module("tokmod")
    src = write_jsonl(tmp_path / "a.jsonl", [{"text": "a b c"}, {"text": "aaa"}])
    cache = tmp_path / "cache"
    assert measure_lengths(src, tokmod.count, cache_dir=cache).lengths.tolist() == [1, 3]
    (code / "tokhelper.py").write_text("def split(text):\n    return list(text)\n")  # the helper edited
    importlib.reload(importlib.import_module("tokhelper"))
    tokmod = importlib.reload(tokmod)
    assert measure_lengths(src, tokmod.count, cache_dir=cache).lengths.tolist() == [3, 5]
    monkeypatch.delitem(sys.modules, "tokhelper")
    monkeypatch.delitem(sys.modules, "tokmod")


def test_an_unwritable_cache_warns_once_and_returns_the_result(bpe: Tokenizer, tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "a.jsonl", [{"text": "a b"}])
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    with pytest.warns(measure.CacheWarning, match="cannot store the result in the cache") as caught:
        hist = measure_lengths(src, bpe, cache_dir=blocker / "sub", out=tmp_path / "o.npy")
    assert len(caught) == 1 and "\n" not in str(caught[0].message)
    assert hist.n_samples == 1 and np.load(tmp_path / "o.npy").tolist() == [len(bpe.encode("a b").ids)]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "wrong lengths"])
def test_a_corrupt_cache_entry_is_discarded_and_measured_again(
    bpe: Tokenizer, tmp_path: Path, damage: str
) -> None:
    src = write_jsonl(tmp_path / "a.jsonl", [{"text": t} for t in ["a b", "c d e", "f"]])
    cache, out = tmp_path / "cache", tmp_path / "o.npy"
    first = measure_lengths(src, bpe, cache_dir=cache, out=out)
    want = np.load(out)
    [npz] = cache.glob("*.npz")
    [lengths] = cache.glob("*.lengths.npy")
    if damage == "truncate":
        npz.write_bytes(npz.read_bytes()[:40])
    elif damage == "garbage":
        npz.write_bytes(b"\x00" * 200)
    else:
        np.save(lengths, np.array([1], dtype=np.int32))
    out.unlink()
    for _ in range(2):  # measured again, then stored whole again
        assert measure_lengths(src, bpe, cache_dir=cache, out=out) == first
        np.testing.assert_array_equal(np.load(out), want)


# ---------------------------------------------------------------------------- malformed records
def test_jsonl_lines_that_only_join_into_json_are_refused(bpe: Tokenizer, tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"  # three invalid lines; joined with commas, three valid objects
    path.write_text('{"text": "a", "x": [1\n2]}\n{"text": "b"}, {"text": "c"}\n')
    with pytest.raises(ValueError, match=r"a\.jsonl: line 1: not valid JSON"):
        measure_lengths(path, bpe, field="text", cache=False)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("id,text\n1,fine\n2\n3,ok\n", r"c\.csv: line 3: 1 field\(s\), the header has 2 \(id, text\)$"),
        ('id,text\n1,"two\nlines"\n2,a,b\n', r"c\.csv: line 4: 3 field\(s\), the header has 2"),
    ],
)
def test_a_csv_row_with_the_wrong_number_of_fields_is_an_error(
    bpe: Tokenizer, tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "c.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        measure_lengths(path, bpe, field="text", cache=False)
    path.write_text('id,text\n1,""\n2,"a, b"\n')  # an empty text and a quoted comma are fine
    got = measure_lengths(path, bpe, field="text", cache=False)
    assert got == LengthHistogram.from_lengths([len(bpe.encode(t).ids) for t in ["", "a, b"]])


# ---------------------------------------------------------------------------- hangs and memory
def test_a_looping_chat_template_is_stopped_in_one_line(
    hf: PreTrainedTokenizerFast, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import copy
    import time

    looping = copy.deepcopy(hf)
    looping.chat_template = (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ eos_token }}"
    )
    monkeypatch.setattr(_tokenizer, "TEMPLATE_SECONDS", 0.5)
    src = write_jsonl(tmp_path / "c.jsonl", [{"messages": [{"role": "user", "content": "hi"}]}])
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"c\.jsonl: the chat template ran for over 0\.5 s"):
        measure_lengths(src, looping, chat_field="messages", cache=False, processes=1)
    assert time.monotonic() - start < 30


def test_a_record_over_the_size_limit_is_refused_before_it_is_read_whole(
    bpe: Tokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from analysis.measure import _pieces, _records

    for module in (_pieces, _records):
        monkeypatch.setattr(module, "MAX_RECORD_BYTES", 1000)
    src = write_jsonl(tmp_path / "a.jsonl", [{"text": "ok"}, {"text": "x " * 2000}])
    with pytest.raises(
        ValueError, match=r"a\.jsonl: line 2: a line of 4,013 bytes, over the 1,000-byte limit"
    ):
        measure_lengths(src, bpe, cache=False)
    pq.write_table(pa.table({"text": ["ok", "x" * 2000]}), tmp_path / "a.parquet")
    with pytest.raises(ValueError, match=r"a\.parquet: row 1: a value of 2,000 bytes"):
        measure_lengths(tmp_path / "a.parquet", bpe, cache=False)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "big.txt").write_text("y" * 1500)
    with pytest.raises(ValueError, match=r"big\.txt: a file of 1,500 bytes"):
        measure_lengths(tmp_path / "t", bpe, cache=False)
    (tmp_path / "c.csv").write_text("text\nok\n" + "z" * 1500 + "\n")
    with pytest.raises(ValueError, match=r"c\.csv: line 3: a field of"):
        measure_lengths(tmp_path / "c.csv", bpe, cache=False)
    with pytest.raises(ValueError, match=r"^row 1: a sample of 1,500 bytes"):
        measure_lengths(["ok", "w" * 1500], bpe, cache=False)


def test_processes_are_capped_by_the_work_and_the_machine(
    bpe: Tokenizer, texts: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from analysis.measure import _run

    started: list[int] = []
    real = _run.run_local

    def spy(plan: Any, job: Any, processes: int) -> Any:
        started.append(processes)
        return real(plan, job, processes)

    monkeypatch.setattr(measure, "run_local", spy)
    src = write_jsonl(tmp_path / "a.jsonl", [{"text": t} for t in texts])  # ~50 kB: one piece
    assert measure_lengths(src, bpe, processes=1000, cache=False).n_samples == len(texts)
    assert started == [1]


# ---------------------------------------------------------------------------- low
def test_deep_nesting_a_lone_surrogate_and_a_corrupt_gz_are_one_line_errors(
    bpe: Tokenizer, hf: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"text": "a"}\n{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(ValueError, match=r"deep\.jsonl: line 2: JSON nested too deeply to read$"):
        measure_lengths(deep, bpe, field="text", cache=False)
    lone = tmp_path / "lone.jsonl"
    lone.write_text('{"text": "a"}\n{"text": "x\\ud800y"}\n')
    with pytest.raises(ValueError, match=r"lone\.jsonl: line 2: a lone surrogate '\\ud800' at character 1"):
        measure_lengths(lone, bpe, field="text", cache=False)
    with pytest.raises(ValueError, match=r"^row 1: a lone surrogate"):
        measure_lengths(["a", "b\ud800"], bpe, cache=False)
    chats = tmp_path / "chat.jsonl"
    chats.write_text('{"m": [{"role": "user", "content": "\\ud800"}]}\n')
    with pytest.raises(ValueError, match=r"chat\.jsonl: ") as caught:
        measure_lengths(chats, hf, chat_field="m", cache=False)
    assert "\n" not in str(caught.value)
    for name in ("a.jsonl.gz", "a.csv.gz"):
        data = gzip.compress(b'{"text": "abc"}\n' * 5000 if "jsonl" in name else b"text\n" + b"abc\n" * 5000)
        (tmp_path / name).write_bytes(data[: len(data) // 2])
        with pytest.raises(ValueError, match=rf"{name}: (near line \d+: )?corrupt gzip data"):
            measure_lengths(tmp_path / name, bpe, field="text", cache=False)


def test_dictionary_encoded_parquet_columns_are_read(bpe: Tokenizer, tmp_path: Path) -> None:
    texts = ["a b", "c", "a b", "d e f"]
    table = pa.table({"text": pa.array(texts).dictionary_encode()})
    pq.write_table(table, tmp_path / "d.parquet")
    assert pq.read_schema(tmp_path / "d.parquet").field("text").type == pa.dictionary(pa.int32(), pa.string())
    got = measure_lengths(tmp_path / "d.parquet", bpe, cache=False)
    assert got == LengthHistogram.from_lengths([len(bpe.encode(t).ids) for t in texts])


def test_out_files_get_the_umask_permissions(bpe: Tokenizer, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        for name in ("o.npy", "o.parquet", "folder/"):
            out = tmp_path / name
            measure_lengths(["a b", "c"], bpe, out=out, cache=False)
            files = [out] if out.is_file() else [out, *out.iterdir()]
            for path in files:
                want = 0o755 if path.is_dir() else 0o644
                assert path.stat().st_mode & 0o777 == want, (path, oct(path.stat().st_mode))
    finally:
        os.umask(old)
