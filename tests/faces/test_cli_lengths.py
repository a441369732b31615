"""The ``lengths`` subcommand glue (analysis.cli._lengths), on a parser of its own."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tokenizers")

from analysis import load_lengths  # noqa: E402
from analysis.cli._lengths import (  # noqa: E402
    add_lengths_subcommand,
    add_raw_data_options,
    measure_for_report,
    progress_wrapper,
    run_lengths_command,
)
from tests.faces.test_measure import make_texts, train_tokenizer  # noqa: E402


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="padding-workbench")
    add_lengths_subcommand(p.add_subparsers(dest="command", required=True))
    return p


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_tokenizer(vocab_size=300).save(str(path))
    return path


def test_lengths_writes_the_per_sample_file(tokenizer_json: Path, tmp_path: Path) -> None:
    texts = make_texts(50, seed=5)
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)))
    out = tmp_path / "lengths.npy"
    args = parser().parse_args(
        [
            "lengths",
            str(src),
            "--tokenizer",
            str(tokenizer_json),
            "--field",
            "text",
            "--out",
            str(out),
            "--processes",
            "1",
            "--no-cache",
        ]
    )
    printed = io.StringIO()
    hist = run_lengths_command(args, printed)
    tok = train_tokenizer(vocab_size=300)
    want = [len(tok.encode(t)) for t in texts]
    np.testing.assert_array_equal(np.load(out), want)
    assert load_lengths(out) == hist
    assert printed.getvalue() == (
        f"{out}: 50 samples, {sum(want):,} tokens (lengths "
        f"{min(want)} to {max(want)}, mean {np.mean(want):,.1f})\n"
    )
    args = parser().parse_args(
        [
            "lengths",
            str(src),
            "--tokenizer",
            str(tokenizer_json),
            "--field",
            "text",
            "--out",
            str(out),
            "--no-special-tokens",
            "--no-cache",
        ]
    )
    assert run_lengths_command(args, io.StringIO()).total_tokens == sum(want) - 2 * 50


def test_report_gets_a_lengths_file(tokenizer_json: Path, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    for i, t in enumerate(make_texts(20, seed=6)):
        (tmp_path / "src" / f"{i}.txt").write_text(t)
    report = argparse.ArgumentParser()
    report.add_argument("src")
    report.add_argument("--field", default=None)
    add_raw_data_options(report, tokenizer_required=False)
    args = report.parse_args([str(tmp_path / "src"), "--tokenizer", str(tokenizer_json), "--no-cache"])
    path = measure_for_report(args, tmp_path / "report")
    assert path == tmp_path / "report" / "lengths.npy"
    assert load_lengths(path).n_samples == 20


def test_usage_errors() -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["lengths", "x.jsonl", "--out", "l.npy"])  # no --tokenizer
    with pytest.raises(SystemExit):
        parser().parse_args(
            [
                "lengths",
                "x.jsonl",
                "--tokenizer",
                "t.json",
                "--field",
                "a",
                "--chat-field",
                "b",
                "--out",
                "l.npy",
            ]
        )
    with pytest.raises(SystemExit):
        parser().parse_args(["lengths", "x", "--tokenizer", "t", "--out", "l.npy", "--processes", "0"])


def test_progress_wrapper_passes_pieces_through() -> None:
    from analysis.measure import MeasuredPiece

    pieces = [MeasuredPiece("a", 2, 10, None, (np.array([5]), np.array([2])))]
    assert progress_wrapper(enabled=False) is None
    assert list(progress_wrapper(enabled=True)(pieces)) == pieces


# ---------------------------------------------------------------------------- adversarial
REPO = Path(__file__).resolve().parents[2]


def run_cli(*argv: str, stdin: str = "", timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``python -m analysis ARGV`` in a real subprocess (this worktree's package)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PADDING_DEBUG": ""}
    return subprocess.run(
        [sys.executable, "-m", "analysis", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )


def custom_code_folder(folder: Path, marker: Path) -> Path:
    """A tokenizer folder whose config names a custom class (``auto_map``) in a ``.py`` that
    writes ``marker`` when it is imported."""
    folder.mkdir()
    train_tokenizer(vocab_size=300).save(str(folder / "tokenizer.json"))
    auto = {"AutoTokenizer": ["evil.EvilTokenizer", "evil.EvilTokenizer"]}
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "EvilTokenizer", "auto_map": auto})
    )
    (folder / "config.json").write_text(
        json.dumps({"model_type": "evil", "auto_map": {"AutoConfig": "evil.EvilConfig", **auto}})
    )
    (folder / "evil.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from transformers import PreTrainedTokenizerFast, PretrainedConfig\n"
        "class EvilTokenizer(PreTrainedTokenizerFast):\n    pass\n"
        "class EvilConfig(PretrainedConfig):\n    model_type = 'evil'\n"
    )
    return folder


def test_a_tokenizer_folder_code_never_runs_even_with_y_on_stdin(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    marker = tmp_path / "MARKER"
    folder = custom_code_folder(tmp_path / "tok", marker)
    src = tmp_path / "ok.jsonl"
    src.write_text('{"text": "a b"}\n')
    out = tmp_path / "o.npy"
    done = run_cli(
        "lengths", str(src), "--tokenizer", str(folder), "--field", "text", "--out", str(out), "--no-cache",
        stdin="y\ny\ny\n",
    )  # fmt: skip
    assert not marker.exists()
    assert done.returncode == 2
    assert "[y/N]" not in done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "never runs" in done.stderr, done.stderr
    assert not out.exists()


@pytest.mark.parametrize("name", ["corpus.parquet", "shards/"])
def test_lengths_never_writes_over_its_own_input(tokenizer_json: Path, tmp_path: Path, name: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if name.endswith("/"):
        (tmp_path / "shards").mkdir()
        src = tmp_path / "shards" / "a.parquet"
        out = str(tmp_path / "shards")
        source = out
    else:
        src = tmp_path / name
        out = source = str(src)
    pq.write_table(pa.table({"text": make_texts(20, seed=3)}), src)
    before = src.read_bytes()
    args = [
        "lengths",
        source,
        "--tokenizer",
        str(tokenizer_json),
        "--field",
        "text",
        "--out",
        out,
        "--no-cache",
    ]
    done = run_cli(*args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "input" in done.stderr, done.stderr
    assert src.read_bytes() == before
    assert sorted(p.name for p in src.parent.iterdir()) == [src.name]


def test_an_unwritable_cache_is_one_warning_line_and_the_run_goes_on(
    tokenizer_json: Path, tmp_path: Path
) -> None:
    src = tmp_path / "ok.jsonl"
    src.write_text('{"text": "a b"}\n{"text": "c"}\n')
    home = tmp_path / "home"
    home.mkdir()
    (home / ".cache").write_text("a file where the cache folder should be")
    out = tmp_path / "o.npy"
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "analysis", "lengths", str(src), "--tokenizer", str(tokenizer_json),
         "--field", "text", "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=180, env={**env, "PYTHONPATH": str(REPO)}, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("\n") == 1 and "warning: " in done.stderr and "not cached" in done.stderr
    assert np.load(out).shape == (2,)


def children(pid: int) -> set[int]:
    """The live child processes of ``pid`` (Linux ``/proc``)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc to see the workers")
def test_sigterm_ends_the_workers_and_removes_the_temporary_files(
    tokenizer_json: Path, tmp_path: Path
) -> None:
    import signal
    import time

    line = json.dumps({"text": " ".join(make_texts(40, seed=2))}) + "\n"
    src = tmp_path / "big.jsonl"
    src.write_text(line * (48_000_000 // len(line)))  # ~48 MB: three pieces, seconds of work
    outdir = tmp_path / "out"
    outdir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = str(outdir / "o.npy")
    command = [sys.executable, "-m", "analysis", "lengths", str(src), "--tokenizer", str(tokenizer_json),
               "--field", "text", "--out", out, "--processes", "2", "--no-cache", "--quiet"]  # fmt: skip
    log = tmp_path / "stderr.txt"
    seen: set[int] = set()
    need = 2 if len(os.sched_getaffinity(0)) >= 2 else 0  # one core: no workers, measured here
    with open(log, "w") as sink:
        process = subprocess.Popen(command, env=env, cwd=REPO, stderr=sink)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            seen |= children(process.pid)
            if len(seen) >= need and any(outdir.iterdir()):  # workers started, the temporary file open
                break
            time.sleep(0.05)
        assert process.poll() is None, "finished before it could be interrupted"
        time.sleep(1.0)  # the workers are measuring
        seen |= children(process.pid)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        for _ in range(100):
            if not any(map(alive, seen)):
                break
            time.sleep(0.1)
        stderr = log.read_text()
        assert process.returncode != 0
        assert stderr.strip().count("\n") == 0 and "interrupted" in stderr, stderr
        assert not [pid for pid in seen if alive(pid)]
        assert list(outdir.iterdir()) == []
    finally:  # a failing run leaves no process behind
        process.kill()
        for pid in seen:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("name", ["lengths.npy", "lengths.parquet"])
def test_an_existing_file_is_replaced_only_if_an_earlier_run_wrote_it_or_with_force(
    tokenizer_json: Path, tmp_path: Path, name: str
) -> None:
    """``--out existing.npy``: the user's unrelated file (float embeddings, a table of other
    columns) is refused in one line and kept; an earlier run's output is replaced; ``--force``
    replaces anything."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "docs.jsonl"
    texts = make_texts(30, seed=2)
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / name
    if name.endswith(".npy"):
        np.save(out, np.linspace(0.0, 1.0, 7))
    else:
        pq.write_table(pa.table({"id": [1, 2], "score": [0.5, 0.25]}), out)
    mine = out.read_bytes()
    argv = ["lengths", str(src), "--tokenizer", str(tokenizer_json), "--out", str(out), "--no-cache"]
    args = parser().parse_args(argv)
    assert not args.force
    with pytest.raises(ValueError, match="not a lengths file written by an earlier run.*--force"):
        run_lengths_command(args, io.StringIO())
    assert out.read_bytes() == mine
    assert run_lengths_command(parser().parse_args([*argv, "--force"]), io.StringIO()).n_samples == 30
    assert load_lengths(out, column=None if name.endswith(".npy") else "length").n_samples == 30
    assert run_lengths_command(parser().parse_args(argv), io.StringIO()).n_samples == 30  # its own


def test_a_cache_hit_with_a_tokenizer_folder_never_imports_transformers(tmp_path: Path) -> None:
    """A cached ``lengths`` run with a Hugging Face tokenizer folder once spent ~10 s importing
    transformers before the cache was read: the key now comes from the folder's files, so the
    second run answers without importing it (and gives the same lengths); an edited folder is
    another key."""
    pytest.importorskip("transformers")
    from transformers import PreTrainedTokenizerFast

    folder = tmp_path / "tok"
    tok = PreTrainedTokenizerFast(tokenizer_object=train_tokenizer(vocab_size=300), eos_token="</s>")
    tok.save_pretrained(str(folder))
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in make_texts(40, seed=8)))
    code = (
        "import sys, time; from analysis.cli import main; t = time.perf_counter(); "
        "rc = main(sys.argv[1:]); print(rc, 'transformers' in sys.modules, round(time.perf_counter() - t, 2))"
    )
    env = {**os.environ, "HOME": str(tmp_path / "home"), "PYTHONPATH": os.getcwd()}

    def run(out: str) -> list[str]:
        argv = ["--quiet", "lengths", str(src), "--tokenizer", str(folder), "--field", "text", "--out", out]
        done = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.split("\n")[-2].split()

    first = run(str(tmp_path / "a.npy"))
    second = run(str(tmp_path / "b.npy"))
    assert first[:2] == ["0", "True"] and second[:2] == ["0", "False"], (first, second)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))
    config = folder / "tokenizer_config.json"
    config.write_text(config.read_text().replace("</s>", "<s>"))  # another tokenizer: measured again
    assert run(str(tmp_path / "c.npy"))[:2] == ["0", "True"]
