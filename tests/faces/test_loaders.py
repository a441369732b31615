"""load_lengths and save_histogram: every format round-trips, globs merge, streaming chunks
add up, and every bad input is one ValueError naming the file and the line or row."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import analysis.counting as counting_module
import analysis.loaders._formats as formats
from analysis import LengthHistogram, load_lengths, save_histogram
from analysis.loaders import SUPPORTED_EXTENSIONS, expand_paths

VALUES = np.array([3, 17, 17, 1, 8192, 250, 3, 17], dtype=np.int64)
EXPECTED = LengthHistogram.from_lengths(VALUES)


def lines(values: np.ndarray) -> str:
    return "".join(f"{v}\n" for v in values.tolist())


def write_jsonl(path: Path, records: list[dict], compress: bool = False) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in records)
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def escaped(path: Path) -> str:
    return re.escape(str(path))


# ------------------------------------------------------------------------------ round trips
@pytest.fixture
def files(tmp_path: Path) -> dict[str, tuple[Path, dict]]:
    """One file per supported layout holding VALUES, with the keyword it needs."""
    out: dict[str, tuple[Path, dict]] = {}
    np.save(tmp_path / "a.npy", VALUES.astype(np.int32))
    out["npy"] = (tmp_path / "a.npy", {})
    (tmp_path / "a.txt").write_text(lines(VALUES))
    out["txt"] = (tmp_path / "a.txt", {})
    with gzip.open(tmp_path / "a.txt.gz", "wt") as handle:
        handle.write(lines(VALUES))
    out["txt.gz"] = (tmp_path / "a.txt.gz", {})
    frame = pd.DataFrame(
        {"id": np.arange(VALUES.size), "n_tokens": VALUES, "text": [f"s{i}" for i in range(VALUES.size)]}
    )
    frame.to_csv(tmp_path / "a.csv", index=False)
    out["csv column"] = (tmp_path / "a.csv", {"column": "n_tokens"})
    frame[["n_tokens"]].to_csv(tmp_path / "single.csv", index=False)
    out["csv single column"] = (tmp_path / "single.csv", {})
    frame.to_csv(tmp_path / "a.csv.gz", index=False)
    out["csv.gz"] = (tmp_path / "a.csv.gz", {"column": "n_tokens"})
    save_histogram(EXPECTED, tmp_path / "hist.csv")
    out["csv histogram"] = (tmp_path / "hist.csv", {})
    frame.to_csv(tmp_path / "a.tsv", sep="\t", index=False)
    out["tsv"] = (tmp_path / "a.tsv", {"column": "n_tokens"})
    EXPECTED.to_frame().to_csv(tmp_path / "hist.tsv", sep="\t", index=False)
    out["tsv histogram"] = (tmp_path / "hist.tsv", {})
    table = pa.table(
        {"n_tokens": VALUES.astype(np.uint16), "input_ids": [list(range(v)) for v in VALUES.tolist()]}
    )
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=3)
    out["parquet ints"] = (tmp_path / "a.parquet", {"column": "n_tokens"})
    out["parquet lists"] = (tmp_path / "a.parquet", {"column": "input_ids"})
    records = [{"input_ids": [0] * v, "n": v} for v in VALUES.tolist()]
    write_jsonl(tmp_path / "a.jsonl", records)
    out["jsonl ints"] = (tmp_path / "a.jsonl", {"field": "n"})
    out["jsonl lists"] = (tmp_path / "a.jsonl", {"field": "input_ids"})
    write_jsonl(tmp_path / "b.jsonl.gz", [{"n": v} for v in VALUES.tolist()], compress=True)
    out["jsonl.gz single field"] = (tmp_path / "b.jsonl.gz", {})
    return out


LAYOUTS = [
    "npy",
    "txt",
    "txt.gz",
    "csv column",
    "csv single column",
    "csv.gz",
    "csv histogram",
    "tsv",
    "tsv histogram",
    "parquet ints",
    "parquet lists",
    "jsonl ints",
    "jsonl lists",
    "jsonl.gz single field",
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip_every_format(files: dict, layout: str) -> None:
    path, kwargs = files[layout]
    hist = load_lengths(path, **kwargs)
    assert hist == EXPECTED
    assert hist.total_tokens == int(VALUES.sum())
    assert load_lengths(str(path), **kwargs) == EXPECTED  # str and Path alike


def test_every_supported_extension_is_covered() -> None:
    covered = {
        ".npy",
        ".txt",
        ".txt.gz",
        ".csv",
        ".csv.gz",
        ".tsv",
        ".tsv.gz",
        ".parquet",
        ".jsonl",
        ".jsonl.gz",
    }
    assert set(SUPPORTED_EXTENSIONS) == covered


def test_tsv_gz(tmp_path: Path) -> None:
    with gzip.open(tmp_path / "a.tsv.gz", "wt") as handle:
        handle.write("n\n" + lines(VALUES))
    assert load_lengths(tmp_path / "a.tsv.gz") == EXPECTED


def test_extension_is_case_insensitive(tmp_path: Path) -> None:
    (tmp_path / "A.TXT").write_text(lines(VALUES))
    assert load_lengths(tmp_path / "A.TXT") == EXPECTED


def test_histogram_csv_with_column_reads_per_sample_lengths(tmp_path: Path) -> None:
    path = save_histogram(EXPECTED, tmp_path / "h.csv")
    as_samples = load_lengths(path, column="count")
    assert as_samples == LengthHistogram.from_lengths(EXPECTED.counts)


def test_histogram_csv_repeated_lengths_are_summed(tmp_path: Path) -> None:
    (tmp_path / "h.csv").write_text("count,length\n2,5\n0,9\n3,5\n1,2\n")
    hist = load_lengths(tmp_path / "h.csv")
    assert hist.lengths.tolist() == [2, 5] and hist.counts.tolist() == [1, 5]


def test_histogram_csv_huge_counts_exact(tmp_path: Path) -> None:
    (tmp_path / "h.csv").write_text(f"length,count\n8192,{2**62}\n1,{2**53 + 1}\n")
    hist = load_lengths(tmp_path / "h.csv")
    assert hist.total_tokens == 8192 * 2**62 + 2**53 + 1
    (tmp_path / "o.csv").write_text(f"length,count\n7,{2**62}\n7,{2**62}\n")
    with pytest.raises(ValueError, match=rf"^{escaped(tmp_path / 'o.csv')}: .*exceeds int64"):
        load_lengths(tmp_path / "o.csv")
    big = 2**45  # above the dense range: counted sparsely, same overflow check
    (tmp_path / "s.csv").write_text(f"length,count\n{big},{2**62}\n{big},{2**62}\n")
    with pytest.raises(ValueError, match=rf"^{escaped(tmp_path / 's.csv')}: .*exceeds int64"):
        load_lengths(tmp_path / "s.csv")


def test_save_histogram_format(tmp_path: Path) -> None:
    path = save_histogram(LengthHistogram.from_lengths([9, 2, 2, 2**40]), tmp_path / "h.csv")
    assert path == tmp_path / "h.csv"
    assert path.read_text() == f"length,count\n2,2\n9,1\n{2**40},1\n"
    with pytest.raises(ValueError, match="expected a LengthHistogram"):
        save_histogram([1, 2], tmp_path / "x.csv")  # type: ignore[arg-type]


def test_arrays_and_histograms_in() -> None:
    assert load_lengths(VALUES) == EXPECTED
    assert load_lengths(VALUES.tolist()) == EXPECTED
    assert load_lengths(pd.Series(VALUES)) == EXPECTED
    assert load_lengths(EXPECTED) is EXPECTED
    frame = pd.DataFrame({"id": VALUES * 0, "n": VALUES})
    assert load_lengths(frame, column="n") == EXPECTED
    assert load_lengths(frame[["n"]]) == EXPECTED
    with pytest.raises(ValueError, match=r"^the DataFrame: 2 columns \(id, n\); pass column="):
        load_lengths(frame)
    with pytest.raises(ValueError, match="apply to files and DataFrames"):
        load_lengths(VALUES, column="n")


def test_allow_zero_in_files(tmp_path: Path) -> None:
    (tmp_path / "z.txt").write_text("4\n0\n")
    with pytest.raises(ValueError, match=r"z.txt: line 2: zero length 0 \(pass allow_zero"):
        load_lengths(tmp_path / "z.txt")
    hist = load_lengths(tmp_path / "z.txt", allow_zero=True)
    assert hist.lengths.tolist() == [0, 4]
    write_jsonl(tmp_path / "z.jsonl", [{"ids": []}, {"ids": [1]}])
    assert load_lengths(tmp_path / "z.jsonl", allow_zero=True).lengths.tolist() == [0, 1]


def test_floats_that_are_integers_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_text("n\n3.0\n17\n")
    assert load_lengths(tmp_path / "f.csv").lengths.tolist() == [3, 17]
    np.save(tmp_path / "f.npy", np.array([3.0, 17.0]))
    assert load_lengths(tmp_path / "f.npy").lengths.tolist() == [3, 17]


def test_whitespace_and_crlf(tmp_path: Path) -> None:
    (tmp_path / "w.txt").write_bytes(b" 3\r\n17 \r\n")
    assert load_lengths(tmp_path / "w.txt").lengths.tolist() == [3, 17]
    (tmp_path / "w.csv").write_text("id, n\n1, 3\n2, 17\n")
    assert load_lengths(tmp_path / "w.csv", column="n").lengths.tolist() == [3, 17]


# ------------------------------------------------------------------------------ globs
def test_glob_merges_files_in_sorted_order(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    parts = [rng.integers(1, 500, size=n) for n in (10, 1, 57)]
    for i, part in enumerate(parts):
        np.save(tmp_path / f"shard-{i}.npy", part)
    (tmp_path / "other.txt").write_text(lines(parts[0]))
    merged = load_lengths(tmp_path / "shard-*.npy")
    assert merged == LengthHistogram.from_lengths(np.concatenate(parts))
    assert merged == sum(
        (LengthHistogram.from_lengths(p) for p in parts[1:]), LengthHistogram.from_lengths(parts[0])
    )
    everything = load_lengths(str(tmp_path / "*"))
    assert everything.n_samples == 68 + 10
    seen: list[tuple[list[str], str]] = []

    def record(paths, desc):
        seen.append(([Path(p).name for p in paths], desc))
        return paths

    assert load_lengths(tmp_path / "shard-*.npy", progress=record) == merged
    assert seen == [(["shard-0.npy", "shard-1.npy", "shard-2.npy"], "loading")]


def test_glob_mixing_formats_and_recursion(tmp_path: Path) -> None:
    (tmp_path / "sub" / "deep").mkdir(parents=True)
    (tmp_path / "sub" / "a.txt").write_text("1\n2\n")
    save_histogram(LengthHistogram.from_counts([2, 3], [5, 1]), tmp_path / "sub" / "deep" / "h.csv")
    hist = load_lengths(f"{tmp_path}/sub/**/*.*")
    assert hist.lengths.tolist() == [1, 2, 3] and hist.counts.tolist() == [1, 6, 1]


def test_glob_error_names_the_bad_file_and_returns_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("1\n2\n")
    (tmp_path / "b.txt").write_text("3\n-4\n")
    with pytest.raises(ValueError, match=rf"^{escaped(tmp_path / 'b.txt')}: line 2: negative"):
        load_lengths(tmp_path / "*.txt")


def test_a_directory_is_every_file_below_it(tmp_path: Path) -> None:
    """One path expander (``analysis.loaders.expand_paths``) for the whole package: a folder of
    shards loads as the glob of all its files would, hidden files and folders skipped, the
    same with or without a Dask client (``measure_lengths`` reads folders the same way)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / ".cache").mkdir()
    np.save(tmp_path / "a.npy", np.array([1, 2, 2]))
    (tmp_path / "sub" / "b.txt").write_text("7\n2\n")
    (tmp_path / ".cache" / "junk.bin").write_bytes(b"\0")
    (tmp_path / ".hidden.csv").write_text("not,lengths\n")
    assert load_lengths(tmp_path) == LengthHistogram.from_lengths([1, 2, 2, 7, 2])
    (tmp_path / "sub" / "index.json").write_text("{}")
    with pytest.raises(ValueError, match=rf"^{escaped(tmp_path / 'sub' / 'index.json')}: unknown file type"):
        load_lengths(tmp_path)


# ------------------------------------------------------------------------------ streaming
@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    """Force many chunks on small files, so chunk boundaries are exercised."""
    monkeypatch.setattr(formats, "_CHUNK_ROWS", 32)  # the readers live in loaders._formats
    monkeypatch.setattr(counting_module, "_DENSE_LIMIT", 1000)  # the counter lives in counting
    return 32


def test_chunked_reading_adds_up(tmp_path: Path, small_chunks: int) -> None:
    rng = np.random.default_rng(11)
    values = rng.integers(1, 3000, size=1000)  # some above the dense limit
    values[::97] = 2**45
    expected = LengthHistogram.from_lengths(values)
    np.save(tmp_path / "v.npy", values)
    (tmp_path / "v.txt").write_text(lines(values))
    pd.DataFrame({"n": values}).to_csv(tmp_path / "v.csv", index=False)
    save_histogram(expected, tmp_path / "h.csv")
    pq.write_table(pa.table({"n": values}), tmp_path / "v.parquet", row_group_size=100)
    write_jsonl(tmp_path / "v.jsonl", [{"n": v} for v in values.tolist()])
    for name in ["v.npy", "v.txt", "v.csv", "h.csv", "v.parquet", "v.jsonl"]:
        assert load_lengths(tmp_path / name) == expected, name


@pytest.mark.parametrize("name", ["v.npy", "v.txt", "v.csv", "v.parquet", "v.jsonl"])
def test_error_position_counts_across_chunks(tmp_path: Path, small_chunks: int, name: str) -> None:
    values = np.arange(1, 201)
    values[150] = -5
    np.save(tmp_path / "v.npy", values)
    (tmp_path / "v.txt").write_text(lines(values))
    pd.DataFrame({"n": values}).to_csv(tmp_path / "v.csv", index=False)
    pq.write_table(pa.table({"n": values}), tmp_path / "v.parquet", row_group_size=70)
    write_jsonl(tmp_path / "v.jsonl", [{"n": v} for v in values.tolist()])
    where = {
        "v.npy": "row 150",
        "v.txt": "line 151",
        "v.csv": "line 152",
        "v.parquet": "row 150",
        "v.jsonl": "line 151",
    }[name]
    with pytest.raises(ValueError, match=rf"^{escaped(tmp_path / name)}: {where}: negative length -5$"):
        load_lengths(tmp_path / name)


def test_npy_is_memory_mapped_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    np.save(tmp_path / "v.npy", VALUES)
    calls = []
    real_load = np.load

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(np, "load", spy)
    assert load_lengths(tmp_path / "v.npy") == EXPECTED
    assert calls == [{"mmap_mode": "r", "allow_pickle": False}]


# ------------------------------------------------------------------------------ bad input
def bad_file(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif name.endswith(".gz"):
        with gzip.open(path, "wt") as handle:
            handle.write(content)
    else:
        path.write_text(content)
    return path


TEXT_CASES = [
    # (file name, content, keywords, message after "<path>: ")
    ("e.txt", "", {}, r"empty file, no lengths"),
    ("e.csv", "", {}, r"empty file, no lengths"),
    ("h.csv", "n\n", {}, r"empty file, no lengths"),
    ("h.csv", "length,count\n", {}, r"empty file, no lengths"),
    ("e.jsonl", "", {}, r"empty file, no lengths"),
    ("e.txt.gz", "", {}, r"empty file, no lengths"),
    ("b.txt", "4\n\n5\n", {}, r"line 2: no length \(blank line, empty field or NaN\)"),
    ("b.txt", "4\n5\n\n", {}, r"line 3: no length \(blank line"),
    ("n.txt", "4\n-5\n", {}, r"line 2: negative length -5"),
    ("z.txt", "4\n0\n", {}, r"line 2: zero length 0 \(pass allow_zero=True"),
    ("f.txt", "4\n2.5\n", {}, r"line 2: length 2.5 is not an integer"),
    ("nan.txt", "4\nnan\n", {}, r"line 2: no length \(blank line, empty field or NaN\)"),
    ("u.txt", "4\n5\nfive\n", {}, r"line 3: cannot read 'five' as a length"),
    ("t.txt", "4\ntrue\n", {}, r"line 2: cannot read 'true' as a length"),
    ("big.txt", f"4\n{2**63}\n", {}, rf"line 2: length {2**63} is too large"),
    ("two.txt", "4,5\n6,7\n", {}, r"line 1: expected one integer per line, found 2 fields"),
    ("two.txt", "4\n6,7\n", {}, r"line 2: expected 1 field\(s\) like the first line, found 2$"),
    ("c.csv", "id,n\n1,4\n2,-1\n", {"column": "n"}, r"line 3: negative length -1"),
    ("c.csv", "id,n\n1,4\n2,\n", {"column": "n"}, r"line 3: no length \(blank line, empty"),
    ("c.csv", "id,n\n1,4\n2,x\n", {"column": "n"}, r"line 3: cannot read 'x' as a length"),
    ("c.csv", "id,n\n1,4\n2,True\n", {"column": "n"}, r"line 3: cannot read 'True' as a length"),
    ("c.csv", "id,n\n1,4\n", {"column": "m"}, r"no column 'm'; columns: id, n"),
    ("c.csv", "id,n\n1,4\n", {}, r"2 columns \(id, n\); pass column= \(--column\) naming the lengths column"),
    ("c.tsv", "id\tn\n1\t4\n2\t0\n", {"column": "n"}, r"line 3: zero length 0"),
    ("noheader.csv", "5\n6\n", {}, r"line 1: header '5' looks like a length"),
    ("h.csv", "length,count\n5,2\n6,-1\n", {}, r"line 3: negative count -1"),
    ("h.csv", "length,count\n5,2\n-6,1\n", {}, r"line 3: negative length -6"),
    ("h.csv", "length,count\n5,2\n6,1.5\n", {}, r"line 3: count 1.5 is not an integer"),
    ("h.csv", "length,count\n5,2\n6,\n", {}, r"line 3: no count \(blank line"),
    ("h.csv", "length,count\n5,0\n", {}, r"empty input, no samples \(all counts are zero\)"),
    ("j.jsonl", '{"n": 4}\n{"n": -4}\n', {}, r"line 2: negative length -4"),
    ("j.jsonl", '{"n": 4}\n{"n": 4.5}\n', {}, r"line 2: length 4.5 is not an integer"),
    (
        "j.jsonl",
        '{"n": 4}\n{"n": true}\n',
        {},
        r"line 2: field 'n' holds a bool \(true\), not a length: expected",
    ),
    (
        "j.jsonl",
        '{"n": 4}\n{"n": null}\n',
        {},
        r"line 2: field 'n' holds null \(null\), not a length: expected",
    ),
    ("j.jsonl", '{"n": 4}\n{"n": "4"}\n', {}, r"line 2: field 'n' holds a string \(\"4\"\)"),
    ("j.jsonl", '{"n": 4}\n{"n": NaN}\n', {}, r"line 2: length is nan, not a number"),
    ("j.jsonl", '{"n": 4}\n{"n": 4}\n\n', {}, r"line 3: blank line"),
    ("j.jsonl", '{"n": 4}\n{"n": 4\n', {}, r"line 2: not valid JSON \(Expecting"),
    ("j.jsonl", '{"n": 4}\n[4]\n', {}, r"line 2: expected a JSON object, got list"),
    ("j.jsonl", '{"n": 4}\n{"m": 4}\n', {}, r"line 2: no field 'n'; fields: m"),
    ("j.jsonl", '{"n": 4, "m": 1}\n', {}, r"line 1: 2 fields \(n, m\); pass field="),
    ("j.jsonl", f'{{"n": {2**64}}}\n', {}, rf"line 1: length {2**64} is too large"),
    ("j.jsonl.gz", '{"n": 4}\n{"n": 0}\n', {}, r"line 2: zero length 0"),
    ("bad.jsonl.gz", b"not gzip", {}, r"cannot read: .*gzip"),
    ("x.xlsx", "", {}, r"unknown file type '\.xlsx'; supported: \.npy, \.txt"),
    ("noext", "1\n", {}, r"unknown file type '\(none\)'"),
    ("binary.csv", b"\xff\xfe\x00\x81", {}, r"line 1, byte 1: b.\\xff. is not UTF-8 text"),
    ("a.txt", "4\n", {"column": "n"}, r"column= \(--column\) does not apply to \.txt files"),
    ("a.csv", "n\n4\n", {"field": "n"}, r"field= \(--field\) applies to \.jsonl files"),
    (
        "a.jsonl",
        '{"n": 4}\n',
        {"column": "n"},
        r"column= \(--column\) does not apply to \.jsonl files \(use field= \(--field\)\)",
    ),
]


@pytest.mark.parametrize(
    ("name", "content", "kwargs", "message"), TEXT_CASES, ids=[f"{c[0]}:{c[3][:30]}" for c in TEXT_CASES]
)
def test_bad_text_files(tmp_path: Path, name: str, content: str | bytes, kwargs: dict, message: str) -> None:
    path = bad_file(tmp_path, name, content)
    with pytest.raises(ValueError, match=rf"^{escaped(path)}: {message}") as info:
        load_lengths(path, **kwargs)
    assert "\n" not in str(info.value)


NPY_CASES = [
    (np.array([], dtype=np.int32), r"empty file, no lengths"),
    (np.array([4, -1], dtype=np.int16), r"row 1: negative length -1"),
    (np.array([4, 0], dtype=np.uint8), r"row 1: zero length 0"),
    (np.array([4, np.nan]), r"row 1: length is nan, not a number"),
    (np.array([4, 4.5]), r"row 1: length 4.5 is not an integer"),
    (np.array([True]), r"row 0: bool is not a length"),
    (np.array([1, 2**63], dtype=np.uint64), r"row 1: length 9223372036854775808 is too large"),
    (np.ones((2, 2), dtype=np.int32), r"expected a 1-D array of lengths, got shape \(2, 2\)"),
    (np.array(["4"]), r"lengths must be integers, got dtype <U1"),
    (np.array([4, None], dtype=object), r"cannot read: .*Python objects"),
]


@pytest.mark.parametrize(("array", "message"), NPY_CASES, ids=[c[1][:30] for c in NPY_CASES])
def test_bad_npy_files(tmp_path: Path, array: np.ndarray, message: str) -> None:
    path = tmp_path / "bad.npy"
    np.save(path, array, allow_pickle=True)
    with pytest.raises(ValueError, match=rf"^{escaped(path)}: {message}"):
        load_lengths(path)


def test_corrupt_npy(tmp_path: Path) -> None:
    path = bad_file(tmp_path, "c.npy", b"not an npy file at all")
    with pytest.raises(ValueError, match=rf"^{escaped(path)}: cannot read"):
        load_lengths(path)


PARQUET_CASES = [
    ({"n": pa.array([4, None, 5])}, {}, r"row 1: missing value \(null\)"),
    ({"n": pa.array([4, 5, -5])}, {}, r"row 2: negative length -5"),
    ({"n": pa.array([4.0, 5.5])}, {}, r"row 1: length 5.5 is not an integer"),
    ({"n": pa.array([4.0, float("nan")])}, {}, r"row 1: length is nan, not a number"),
    ({"ids": pa.array([[1], None])}, {}, r"row 1: missing value \(null\)"),
    ({"ids": pa.array([[1], []])}, {}, r"row 1: zero length 0"),
    ({"n": pa.array(["4"])}, {}, r"column 'n' has type string; expected integers or lists"),
    ({"n": pa.array([True])}, {}, r"column 'n' has type bool; expected integers or lists"),
    ({"n": pa.array([4]), "m": pa.array([5])}, {}, r"2 columns \(n, m\); pass column="),
    ({"n": pa.array([4])}, {"column": "q"}, r"no column 'q'; columns: n"),
    ({"n": pa.array([], type=pa.int64())}, {}, r"empty file, no lengths"),
    ({"n": pa.array([2**63], type=pa.uint64())}, {}, r"row 0: length 9223372036854775808 is"),
]


@pytest.mark.parametrize(
    ("columns", "kwargs", "message"), PARQUET_CASES, ids=[c[2][:30] for c in PARQUET_CASES]
)
def test_bad_parquet_files(tmp_path: Path, columns: dict, kwargs: dict, message: str) -> None:
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(columns), path)
    with pytest.raises(ValueError, match=rf"^{escaped(path)}: {message}"):
        load_lengths(path, **kwargs)


def test_corrupt_parquet(tmp_path: Path) -> None:
    path = bad_file(tmp_path, "c.parquet", b"PAR1 but not really")
    with pytest.raises(ValueError, match=rf"^{escaped(path)}: cannot read as Parquet"):
        load_lengths(path)


def test_missing_paths_and_empty_globs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=rf"^{escaped(tmp_path / 'nope.csv')}: no such file or directory$"):
        load_lengths(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match=r": no files match this pattern$"):
        load_lengths(tmp_path / "*.parquet")
    with pytest.raises(ValueError, match=rf"^{escaped(tmp_path)}: empty directory, no files$"):
        load_lengths(tmp_path)
    with pytest.raises(ValueError, match="got bytes"):
        load_lengths(b"a.csv")


@pytest.mark.parametrize("values", [[], [1, -2], [1, True], [1.5]])
def test_bad_arrays(values: list) -> None:
    with pytest.raises(ValueError):
        load_lengths(values)


# ------------------------------------------------------------------------------ properties
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(st.integers(0, 2**62), st.integers(0, 2**62), min_size=1, max_size=30).filter(
        lambda d: any(d.values())
    )
)
def test_property_csv_round_trip_is_identity(tmp_path: Path, table: dict[int, int]) -> None:
    hist = LengthHistogram.from_counts(list(table), list(table.values()), allow_zero=True)
    path = save_histogram(hist, tmp_path / "h.csv")
    back = load_lengths(path, allow_zero=True)
    assert back == hist
    assert back.total_tokens == sum(n * c for n, c in table.items())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.integers(1, 10**6), min_size=1, max_size=20), min_size=1, max_size=4))
def test_property_glob_merge_equals_sum(tmp_path: Path, parts: list[list[int]]) -> None:
    folder = tmp_path / f"g{abs(hash(str(parts)))}"
    folder.mkdir()
    for i, part in enumerate(parts):
        (folder / f"{i:03d}.txt").write_text("".join(f"{v}\n" for v in part))
    hist = load_lengths(folder / "*.txt")
    assert hist.total_tokens == sum(map(sum, parts))
    assert hist == LengthHistogram.from_lengths([v for part in parts for v in part])


def test_utf8_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    bom = "\ufeff"
    (tmp_path / "h.csv").write_bytes(f"{bom}length,count\n5,2\n".encode())
    (tmp_path / "a.jsonl").write_bytes(f'{bom}{{"n": 5}}\n{{"n": 5}}\n'.encode())
    (tmp_path / "a.txt").write_bytes(f"{bom}5\n5\n".encode())
    for name in ["h.csv", "a.jsonl", "a.txt"]:
        assert load_lengths(tmp_path / name) == LengthHistogram.from_counts([5], [2]), name


# ---------------------------------------------------------------------------- adversarial
def symlink_loop(tmp_path: Path) -> Path:
    """``d/a.txt``, ``d/sub/b.txt``, and ``d/sub/up -> d``: a folder that holds itself."""
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("5\n")
    (d / "sub" / "b.txt").write_text("7\n")
    (d / "sub" / "up").symlink_to(d, target_is_directory=True)
    return d


@pytest.mark.parametrize("pattern", ["**/*.txt", "*/*/*/*.txt", "*/*/*/*/*/*/*.txt", "", "**"])
def test_a_symlink_loop_is_walked_once_and_each_file_counted_once(tmp_path: Path, pattern: str) -> None:
    import time

    d = symlink_loop(tmp_path)
    start = time.monotonic()
    hist = load_lengths(f"{d}/{pattern}" if pattern else d)
    assert time.monotonic() - start < 10
    # a fixed depth reaches files through the loop (d/sub/up/sub/b.txt is d/sub/b.txt)
    want = {"*/*/*/*.txt": [7], "*/*/*/*/*/*/*.txt": [5]}.get(pattern, [5, 7])
    assert hist == LengthHistogram.from_lengths(want)


def test_a_file_reached_by_two_names_is_counted_once(tmp_path: Path) -> None:
    d = tmp_path / "d"
    (d / "x").mkdir(parents=True)
    (d / "x" / "a.txt").write_text("5\n")
    (d / "y").symlink_to(d / "x", target_is_directory=True)
    (d / "b.txt").symlink_to(d / "x" / "a.txt")
    assert load_lengths(d).n_samples == 1
    assert load_lengths(f"{d}/*/*.txt").n_samples == 1
    assert [p.name for p in expand_paths(f"{d}/**/*.txt")[1]] == ["b.txt"]  # the first name, sorted


def test_jsonl_lines_that_only_join_into_json_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"  # joined with commas: three valid records from three bad lines
    path.write_text('{"length": [1\n2]}\n{"length": [5]}, {"length": [6]}\n')
    with pytest.raises(ValueError, match=r"a\.jsonl: line 1: not valid JSON"):
        load_lengths(path)


def test_deeply_nested_json_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text('{"length": 1}\n{"length": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(ValueError, match=r"deep\.jsonl: line 2: JSON nested too deeply to read$"):
        load_lengths(path)


def test_a_list_that_is_not_token_ids_is_refused_naming_the_field(tmp_path, capsys):
    """``summary chats.jsonl --field messages`` once reported the message counts as lengths
    (exit 0); a list of objects (or strings, lists, floats) is refused in one line naming the
    field and what it holds, with the command that counts its tokens; lists of token ids (ints)
    are still their lengths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from analysis.cli import main

    chats = tmp_path / "chats.jsonl"
    message = {"role": "user", "content": "hi"}
    chats.write_text("".join(json.dumps({"messages": [message] * n}) + "\n" for n in (1, 3, 2)))
    code = main(["summary", str(chats), "--field", "messages"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "field 'messages' holds a list of objects" in err[0] and "--chat-field messages" in err[0]
    for bad, what in (
        ([["a"]], "a list of lists"),
        (["a", "b"], "a list of strings"),
        ([1.5], "a list of numbers"),
    ):
        path = tmp_path / "bad.jsonl"
        path.write_text(json.dumps({"x": bad}) + "\n")
        with pytest.raises(ValueError, match=f"field 'x' holds {what}"):
            load_lengths(path)
    ids = tmp_path / "ids.jsonl"
    ids.write_text(json.dumps({"input_ids": [5, 6, 7]}) + "\n" + json.dumps({"input_ids": []}) + "\n")
    assert load_lengths(ids, allow_zero=True).lengths.tolist() == [0, 3]
    table = tmp_path / "chats.parquet"
    pq.write_table(pa.table({"messages": [[message], [message, message]]}), table)
    with pytest.raises(ValueError, match="column 'messages' holds lists of struct"):
        load_lengths(table)


def test_a_headerless_csv_is_never_read_with_a_data_row_as_its_header(tmp_path, capsys):
    """A two-column CSV without a header: the hint once said ``pass column=`` (Python) and
    ``--column 500`` then dropped the first row; now any header that looks like a length is
    refused in one line, with or without --column, and hints name the CLI's options."""
    from analysis.cli import main

    path = tmp_path / "pairs.csv"
    path.write_text("500,1\n20,2\n30,3\n")
    for extra in ([], ["--column", "500"]):
        assert main(["summary", str(path), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "header '500' looks like a length" in err[0], err
    named = tmp_path / "named.csv"
    named.write_text("id,n\n1,4\n")
    assert main(["summary", str(named)]) == 2
    assert "pass column= (--column)" in capsys.readouterr().err
