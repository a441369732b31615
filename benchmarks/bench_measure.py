"""How fast does ``measure_lengths`` count tokens of 100,000 documents, against the usual ways?

Run:  .venv/bin/python benchmarks/bench_measure.py [--docs N] [--words W]

Builds ``N`` seeded pseudo-text documents (Zipf-sampled words of a generated vocabulary,
log-normal lengths around ``W`` words, a few hundred tokens each), a byte-level BPE trained on
them offline (``tokenizers``) and wrapped in a ``transformers`` fast tokenizer, and writes
them to one JSONL file.  Then, in the same run, prints samples/s and tokens/s of:

* ``measure_lengths`` on the JSONL file in this process (the Rust batch API), and with worker
  processes;
* ``datasets.map`` with the same fast tokenizer, one example at a time and batched (on an
  in-memory ``Dataset``, whose building is not timed), and a plain Python loop over
  ``tokenizer.encode`` (on a list of strings already in memory);
* a cached re-run (the median of 5, after the run that stores the result);
* the peak resident memory of ``measure_lengths`` in a fresh process, for growing corpora;
* Dask: a ``LocalCluster`` with two worker processes against one process.

Every way is checked to give the same total token count.  Big ways run once (they take
seconds); nothing here is asserted about speed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import median_seconds

from analysis.measure import measure_lengths

_SYLLABLES = [
    "ka",
    "to",
    "ri",
    "en",
    "sa",
    "lo",
    "mi",
    "der",
    "an",
    "qu",
    "st",
    "or",
    "il",
    "be",
    "ne",
    "th",
    "ing",
    "al",
    "ve",
    "co",
    "pr",
    "ex",
    "ion",
    "ma",
    "ut",
]


def make_docs(n_docs: int, words: float, seed: int = 1701) -> list[str]:
    """``n_docs`` documents of Zipf-sampled pseudo-words, log-normal lengths around ``words``."""
    rng = np.random.default_rng(seed)
    vocab = np.array(["".join(rng.choice(_SYLLABLES, size=int(rng.integers(1, 5)))) for _ in range(20_000)])
    n_words = np.clip(rng.lognormal(np.log(words), 0.6, n_docs), 5, 20 * words).astype(int)
    ranks = np.minimum(rng.zipf(1.3, int(n_words.sum())) - 1, vocab.size - 1)
    tokens = vocab[ranks]
    bounds = np.concatenate([[0], np.cumsum(n_words)])
    puncts = np.array([". ", ", ", " "])
    return [
        " ".join(tokens[a:b]) + puncts[i % 3].strip()
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))
    ]


def build_tokenizer(docs: list[str]) -> Any:
    """A byte-level BPE (16k vocabulary) trained on the documents, as a transformers tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=16_000,
        show_progress=False,
        special_tokens=["<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(docs[:20_000], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 1)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def report(label: str, seconds: float, n_docs: int, n_tokens: int, base: float | None) -> None:
    speed = "" if base is None else f"  {base / seconds:6.1f}x the one-at-a-time map"
    print(
        f"{label:44s} {seconds:8.2f} s {n_docs / seconds:10,.0f} samples/s "
        f"{n_tokens / seconds / 1e6:7.2f} M tokens/s{speed}"
    )


# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so a child forked from this big
# process would report this process's size.
_RSS_PROBE = """
import sys
from analysis.measure import measure_lengths
hist = measure_lengths(sys.argv[1], sys.argv[2], field="text", processes=1, cache=False)
status = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
print(hist.n_samples, status)
"""


def peak_rss(root: Path, docs: list[str], tok_json: Path) -> None:
    """Peak resident memory of ``measure_lengths`` in a fresh process, for growing corpora."""
    print("\npeak RSS of measure_lengths (fresh process, 1 process, no out=):")
    for fraction in (0.25, 0.5, 1.0):
        part = root / f"part{fraction}.jsonl"
        write_jsonl(part, docs[: int(fraction * len(docs))])
        probe = subprocess.run(
            [sys.executable, "-c", _RSS_PROBE, str(part), str(tok_json)],
            check=True,
            capture_output=True,
            text=True,
        )
        samples, rss_kib = map(int, probe.stdout.split())
        print(
            f"  {samples:>9,} documents ({part.stat().st_size / 2**20:5.0f} MiB): "
            f"peak RSS {rss_kib / 1024:6.0f} MiB"
        )
        part.unlink()


def write_jsonl(path: Path, docs: list[str]) -> None:
    import json

    with open(path, "w", encoding="utf-8") as handle:
        for i, doc in enumerate(docs):
            handle.write(json.dumps({"id": i, "text": doc}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--words", type=float, default=180.0)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--only", choices=["rss"], default=None, help="run only the peak-memory probe (default: everything)"
    )
    args = parser.parse_args()

    import datasets

    datasets.disable_progress_bars()
    t0 = time.perf_counter()
    docs = make_docs(args.docs, args.words)
    tok = build_tokenizer(docs)
    print(f"setup (documents + BPE training): {time.perf_counter() - t0:.1f} s; {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        jsonl = root / "docs.jsonl"
        write_jsonl(jsonl, docs)
        tok.save_pretrained(root / "tok")
        tok_json = root / "tok" / "tokenizer.json"
        print(f"{args.docs:,} documents, {jsonl.stat().st_size / 2**20:.0f} MiB of JSONL")

        if args.only == "rss":
            peak_rss(root, docs, tok_json)
            return
        secs, hist = timed(lambda: measure_lengths(jsonl, tok_json, field="text", processes=1, cache=False))
        n, total = hist.n_samples, hist.total_tokens
        print(f"{n:,} samples, {total:,} tokens (mean {hist.mean:.0f}, max {hist.max:,})\n")

        ds = datasets.Dataset.from_dict({"text": docs})
        one, mapped = timed(
            lambda: ds.map(lambda ex: {"n": len(tok(ex["text"])["input_ids"])}, keep_in_memory=True)
        )
        assert sum(mapped["n"]) == total
        report("datasets.map, one example at a time", one, n, total, one)
        batched, mapped = timed(
            lambda: ds.map(
                lambda b: {"n": [len(ids) for ids in tok(b["text"])["input_ids"]]},
                batched=True,
                batch_size=1000,
                keep_in_memory=True,
            )
        )
        assert sum(mapped["n"]) == total
        report("datasets.map, batched (1,000)", batched, n, total, one)
        loop, lengths = timed(lambda: [len(tok.encode(d)) for d in docs])
        assert sum(lengths) == total
        report("Python loop over tokenizer.encode", loop, n, total, one)
        report("measure_lengths, JSONL, 1 process", secs, n, total, one)
        if args.processes > 1:
            many, h = timed(
                lambda: measure_lengths(jsonl, tok_json, field="text", processes=args.processes, cache=False)
            )
            assert h == hist
            report(f"measure_lengths, JSONL, {args.processes} processes", many, n, total, one)
        inmem, h = timed(lambda: measure_lengths(docs, tok, processes=1, cache=False))
        assert h == hist
        report("measure_lengths, list of strings, 1 process", inmem, n, total, one)

        cache_dir = root / "cache"
        first, h = timed(
            lambda: measure_lengths(jsonl, tok_json, field="text", processes=1, cache_dir=cache_dir)
        )
        again = median_seconds(
            lambda: measure_lengths(jsonl, tok_json, field="text", processes=1, cache_dir=cache_dir)
        )
        print(
            f"\ncache: first run {first:.2f} s (tokenize + store), re-run {again * 1e3:.0f} ms "
            f"(hash {jsonl.stat().st_size / 2**20:.0f} MiB + load): {first / again:.0f}x faster"
        )

        peak_rss(root, docs, tok_json)

        from distributed import Client, LocalCluster

        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            client.run(lambda: os.environ.__setitem__("TOKENIZERS_PARALLELISM", "false"))
            measure_lengths(docs[:100], tok_json, client=client, cache=False)  # warm workers
            dask, h = timed(
                lambda: measure_lengths(jsonl, tok_json, field="text", client=client, cache=False)
            )
            assert h == hist
        print()
        report("Dask LocalCluster, 2 workers x 1 thread", dask, n, total, None)
        report("one process (Rust batch API threads)", secs, n, total, None)


if __name__ == "__main__":
    main()
