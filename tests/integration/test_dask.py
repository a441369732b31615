"""measure_lengths and load_lengths_distributed on a real Dask cluster (two worker processes on
loopback): the single machine's lengths, shard by shard, and the same one-line errors.  The
tokenizer and texts are test_measure's (its fixtures, imported)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("transformers")

from tokenizers import Tokenizer  # noqa: E402

from analysis import load_lengths  # noqa: E402
from analysis.loaders import load_lengths_distributed  # noqa: E402
from analysis.measure import _out, _sources, measure_lengths  # noqa: E402
from tests.faces import test_measure as measure_tests  # noqa: E402
from tests.faces.test_measure import check, check_folder, folder_files, measured, write_jsonl  # noqa: E402

#: test_measure's fixtures (the tokenizer, the texts and their lengths), so that the cluster
#: measures exactly what the single machine measures there.
bpe, hf, texts, expected = measure_tests.bpe, measure_tests.hf, measure_tests.texts, measure_tests.expected


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """Two worker processes on loopback."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as dask_client,
    ):
        yield dask_client


def test_dask_cluster_gives_the_single_machine_result(
    monkeypatch: pytest.MonkeyPatch,
    client: Any,
    bpe: Tokenizer,
    texts: list[str],
    expected: np.ndarray,
    tmp_path: Path,
) -> None:
    monkeypatch.setattr(_sources, "_SPLIT_BYTES", 3000)
    jsonl = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in texts])
    pq.write_table(pa.table({"text": texts}), tmp_path / "docs.parquet", row_group_size=64)
    np.save(tmp_path / "l0.npy", expected[:100])
    np.save(tmp_path / "l1.npy", expected[100:])
    for source in (jsonl, tmp_path / "docs.parquet"):
        hist, per_sample = measured(source, bpe, tmp_path, field="text", client=client)
        check(hist, per_sample, expected)
        assert hist == measure_lengths(source, bpe, field="text", processes=1, cache=False)
    with pytest.raises(ValueError, match=r"docs.jsonl: line 1: no field 'body'"):
        measure_lengths(jsonl, bpe, field="body", client=client, cache=False)
    merged = load_lengths_distributed(str(tmp_path / "l*.npy"), client, allow_zero=True)
    assert merged == load_lengths(str(tmp_path / "l*.npy"), allow_zero=True)


def test_dask_workers_write_an_out_folder_per_shard(
    monkeypatch: pytest.MonkeyPatch,
    client: Any,
    bpe: Tokenizer,
    texts: list[str],
    expected: np.ndarray,
    tmp_path: Path,
) -> None:
    monkeypatch.setattr(_sources, "_SPLIT_BYTES", 3000)
    jsonl = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in texts])
    here = measure_lengths(jsonl, bpe, field="text", out=tmp_path / "here", processes=1, cache=False)

    def not_here(path: str, lengths: np.ndarray) -> None:
        raise AssertionError("a shard saved by the client, not by its worker")

    monkeypatch.setattr(_out, "save_shard", not_here)  # this process only, not the workers
    hist = measure_lengths(jsonl, bpe, field="text", out=tmp_path / "shards", client=client, cache=False)
    assert hist == here
    assert len(check_folder(tmp_path / "shards", hist, expected)) > 10
    assert folder_files(tmp_path / "shards") == folder_files(tmp_path / "here")
    with pytest.raises(ValueError, match=r"docs.jsonl: line 1: no field 'body'"):
        measure_lengths(jsonl, bpe, field="body", out=tmp_path / "failed", client=client, cache=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl", "here", "shards"]
