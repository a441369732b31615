"""The report never writes over what it did not write: its folder is new, empty or an earlier
report's, taken literally; its inputs are never inside it, nor its own outputs read back as
inputs; it is written beside the folder and moved into place only when complete, so Ctrl-C,
SIGTERM or ``kill -9`` leave an earlier report as it was (real processes and signals)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest

from analysis import LengthHistogram, cli, load_lengths, save_histogram
from analysis.paths import REPORT_MARKER

#: 1,000 lengths of 30 distinct values from 30 to 900: every report here computes its summary
#: page's frontier, whose floors cost grows with the distinct lengths (seconds at ~600 of them);
#: these tests are about the folder, so 30 distinct lengths do.
LENGTHS = np.random.default_rng(5).integers(1, 31, size=1_000) * 30

#: A report notebook that reads the data's first bytes (a wrong ``data_path`` fails it), and
#: (env SLOW) sleeps after writing a flag file (env STARTED), so that a test can signal the
#: report while a notebook runs.  It imports nothing of the package: its kernel starts in about
#: 1 s of CPU instead of 2 (``import analysis`` loads pandas, SciPy and numba).
_BODY = """\
import os, time
with open(data_path, "rb") as data:
    print(len(data.read(64)))
if os.environ.get("STARTED"):
    open(os.environ["STARTED"], "w").close()
for _ in range(int(10 * float(os.environ.get("SLOW", "0")))):
    time.sleep(0.1)
"""


def notebooks_in(folder: Path) -> Path:
    folder.mkdir()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("data_path = 'x.csv'\nbatch_size = 1")
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# 01 · Tiny"), cell, nbformat.v4.new_code_cell(_BODY)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / "01_tiny.ipynb")
    return folder


def _use(monkeypatch: pytest.MonkeyPatch, nbs: Path) -> None:
    """The CLI's report runs the notebooks of ``nbs`` (where the default folder is read)."""
    monkeypatch.setattr("analysis.report._folder.NOTEBOOKS_DIR", nbs)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_the_report_did_not_write_is_refused_and_left_alone(tmp_path, monkeypatch, capsys):
    _use(monkeypatch, notebooks_in(tmp_path / "nbs"))
    own = tmp_path / "own"
    (own / "data").mkdir(parents=True)
    user_file = own / "data" / "lengths.csv"
    user_file.write_text("length\n" + "\n".join(map(str, LENGTHS)) + "\n")
    before = _snapshot(own)
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "in.csv")
    code = cli.main(["--quiet", "report", str(src), "--out", str(own)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "a report did not write" in err
    assert _snapshot(own) == before  # the user's file as it was
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing beside


def test_a_file_as_the_output_folder_is_refused(tmp_path, monkeypatch, capsys):
    _use(monkeypatch, notebooks_in(tmp_path / "nbs"))
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "in.csv")
    code = cli.main(["--quiet", "report", str(src), "--out", str(src)])
    assert code == 2 and "is not a folder" in capsys.readouterr().err
    assert load_lengths(src).n_samples == len(LENGTHS)


def test_output_paths_are_literal_reruns_replace_and_globs_skip_reports(tmp_path, monkeypatch, capsys):
    _use(monkeypatch, notebooks_in(tmp_path / "nbs"))
    runs = tmp_path / "runs"
    for name, seed in (("a", 1), ("b", 2)):
        (runs / name).mkdir(parents=True)
        values = np.random.default_rng(seed).integers(1, 21, 2_000) * 25  # 20 distinct lengths
        (runs / name / "l.csv").write_text("length\n" + "\n".join(map(str, values)) + "\n")
    out = runs / "rep_{batch_size}"  # braces: papermill would fill them from the parameters
    argv = ["--quiet", "report", f"{runs}/**/*.csv", "--out", str(out), "--batch-size", "8"]
    assert cli.main(argv) == 0
    first = json.loads((out / "recommendation.json").read_text())
    assert sorted(p.name for p in runs.iterdir()) == ["a", "b", "rep_{batch_size}"]  # no rep_8
    assert (out / REPORT_MARKER).is_file()
    stale = out / "figures" / "not_the_reports.png"
    stale.write_bytes(b"mine")
    assert cli.main(argv) == 2  # a file the earlier report did not write: never deleted
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "figures/not_the_reports.png" in err
    assert stale.read_bytes() == b"mine"
    stale.unlink()
    assert cli.main(argv) == 0  # the glob now also matches the report's data/lengths.csv
    second = json.loads((out / "recommendation.json").read_text())
    assert first["data"]["summary"]["samples"] == second["data"]["summary"]["samples"] == 4_000
    executed = (out / "01_tiny.ipynb").read_text()
    assert ".partial-" not in executed and str(out / "data" / "lengths.csv") in executed
    assert second["notebooks"][0]["parameters"]["data_path"] == str(out / "data" / "lengths.csv")
    assert [p.name for p in runs.iterdir() if p.name.startswith(".")] == []
    capsys.readouterr()
    # an input inside the report's folder: the report would replace it
    code = cli.main(["--quiet", "report", str(out / "data" / "lengths.csv"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "an input inside the output folder" in err and len(err.strip().splitlines()) == 1
    assert json.loads((out / "recommendation.json").read_text()) == second


#: The CLI in a child process, on the notebooks folder given first.
_CHILD = """\
import sys
import analysis.report._folder as folder
folder.NOTEBOOKS_DIR = sys.argv[1]
from analysis.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _start(nbs: Path, src: Path, out: Path, env: dict[str, str], **popen: object) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", _CHILD, str(nbs), "--quiet", "report", str(src), "--out", str(out)]
    return subprocess.Popen(
        argv, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    )


def _wait_for(flag: Path, process: subprocess.Popen[str], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not flag.exists():
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "the notebook never started"
        time.sleep(0.1)


def _ignore_sigint() -> None:  # what a shell does to a background job
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_an_interrupted_rerun_leaves_the_earlier_report_as_it_was(tmp_path, monkeypatch):
    """SIGTERM, SIGINT (even where it was ignored at start, as a shell leaves it for a
    background job: the report ran on to the end and exited 0) and SIGKILL, each while a
    notebook of a rerun runs: the earlier, complete report stays every byte as it was.  The
    reruns are child processes (signalled); the complete runs before and after are in this one.
    The kernel's private socket folder goes with a stopped run; SIGKILL leaves it (the reruns'
    temporary folder is the test's own, short enough for a socket's path)."""
    import shutil
    import tempfile

    nbs = notebooks_in(tmp_path / "nbs")
    _use(monkeypatch, nbs)
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "in.csv")
    out = tmp_path / "report"
    assert cli.main(["--quiet", "report", str(src), "--out", str(out)]) == 0
    before = _snapshot(out)
    cases = [
        (signal.SIGTERM, 128 + signal.SIGTERM, {}),
        (signal.SIGINT, 128 + signal.SIGINT, {"preexec_fn": _ignore_sigint}),
        (signal.SIGKILL, -signal.SIGKILL, {}),
    ]
    temp = Path(tempfile.mkdtemp(prefix="rerun-"))
    try:
        for signum, code, popen in cases:
            env = {"SLOW": "60", "STARTED": str(tmp_path / f"started-{signum}"), "TMPDIR": str(temp)}
            returncode, err, seconds = _signal_rerun(nbs, src, out, env, signum, popen)
            assert returncode == code, err
            assert seconds < 15  # stopped, not run on to the notebook's end
            assert _snapshot(out) == before  # the earlier, complete report: every byte as it was
            left = [p for p in tmp_path.iterdir() if p.name.startswith(".")]
            if signum == signal.SIGKILL:  # no cleanup possible: a staging folder is left beside
                assert [p.name.split("-")[0] for p in left] == [".report.partial"]
                assert sorted(p.name.split("-")[:2] for p in temp.iterdir()) == [
                    ["padding", "report"],
                    ["workbench", "kernel"],
                ]
            else:
                name = signal.Signals(signum).name
                assert err.strip().splitlines() == [
                    f"padding-workbench: interrupted by {name}; {out} is left as it was"
                ]
                assert left == [] and list(temp.iterdir()) == []
    finally:
        shutil.rmtree(temp)
    # the next run removes the killed run's staging folder
    assert cli.main(["--quiet", "report", str(src), "--out", str(out)]) == 0
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def _signal_rerun(
    nbs: Path, src: Path, out: Path, env: dict[str, str], signum: int, popen: dict[str, object]
) -> tuple[int, str, float]:
    """Start a rerun, send it ``signum`` while its notebook runs: its exit code, its stderr,
    and the seconds it took to stop."""
    rerun = _start(nbs, src, out, env, **popen)
    _wait_for(Path(env["STARTED"]), rerun)
    time.sleep(0.3)
    started = time.monotonic()
    rerun.send_signal(signum)
    _, err = rerun.communicate(timeout=30)
    return rerun.returncode, err, time.monotonic() - started


def test_raw_data_is_measured_beside_the_folder_and_moved_into_the_report(tmp_path, monkeypatch, capsys):
    pytest.importorskip("tokenizers")
    from tests.faces.test_measure import make_texts, train_tokenizer

    _use(monkeypatch, notebooks_in(tmp_path / "nbs"))
    tokenizer = tmp_path / "tokenizer.json"
    train_tokenizer(vocab_size=300).save(str(tokenizer))
    (tmp_path / "src").mkdir()
    for i, text in enumerate(make_texts(20, seed=6)):
        (tmp_path / "src" / f"{i}.txt").write_text(text)
    out = tmp_path / "report"
    argv = ["--quiet", "report", str(tmp_path / "src"), "--tokenizer", str(tokenizer), "--no-cache"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    rec = json.loads((out / "recommendation.json").read_text())
    # provenance: the raw data and the tokenizer (path and hash), not the intermediate lengths file
    assert rec["source"] == str(tmp_path / "src") and load_lengths(out / "lengths.npy").n_samples == 20
    digest = hashlib.sha256(b"tokenizer.json\0" + tokenizer.read_bytes()).hexdigest()
    assert rec["measured"] == {
        "source": str(tmp_path / "src"),
        "tokenizer": str(tokenizer),
        "tokenizer_sha256": digest,
        "field": None,
        "chat_field": None,
        "lengths_file": str(out / "lengths.npy"),
    }
    page = (out / "index.html").read_text()
    assert f"Bucketed batching for {tmp_path / 'src'}</h1>" in page and digest[:12] in page
    assert f"measured with the tokenizer {tokenizer}" in page
    assert "lengths.npy" in capsys.readouterr().out  # listed among the files written
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "notes.txt").write_text("mine")
    assert cli.main([*argv, "--out", str(tmp_path / "own")]) == 2  # refused before measuring
    assert sorted(p.name for p in (tmp_path / "own").iterdir()) == ["notes.txt"]


def test_a_report_written_before_the_marker_is_replaced(tmp_path, monkeypatch):
    _use(monkeypatch, notebooks_in(tmp_path / "nbs"))
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "in.csv")
    old = tmp_path / "reports"
    (old / "figures").mkdir(parents=True)
    (old / "figures" / "stale.png").write_bytes(b"old")
    (old / "recommendation.json").write_text(json.dumps({"created_by": "padding-workbench report"}))
    assert cli.main(["--quiet", "report", str(src), "--out", str(old)]) == 0
    assert (old / REPORT_MARKER).is_file() and not (old / "figures" / "stale.png").exists()


def test_a_rerun_never_deletes_what_the_report_did_not_write_and_dot_stays(tmp_path, monkeypatch, capsys):
    """``--out .`` from inside an empty folder writes there (the folder and the shell's working
    directory stay the same inode) and so does its rerun; the marker lists what was written;
    a rerun refuses, in one line naming them, a folder holding the user's notes.md and
    mydata/, and leaves them."""
    _use(monkeypatch, notebooks_in(tmp_path / "nbs"))
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "in.csv")
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    inode = here.stat().st_ino
    for _ in range(2):
        assert cli.main(["--quiet", "report", str(src), "--out", "."]) == 0
        assert os.path.samefile(os.getcwd(), here) and here.stat().st_ino == inode
    listed = json.loads((here / REPORT_MARKER).read_text())["files"]
    assert sorted(listed) == sorted(str(p.relative_to(here)) for p in here.rglob("*") if p.is_file())
    assert "recommendation.json" in listed and "data/lengths.csv" in listed
    (here / "notes.md").write_text("my notes")
    (here / "mydata").mkdir()
    (here / "mydata" / "x.csv").write_text("1\n")
    before = _snapshot(here)
    capsys.readouterr()
    assert cli.main(["--quiet", "report", str(src), "--out", str(here)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mydata/, notes.md" in err[0], err
    assert _snapshot(here) == before


def test_inputs_inside_the_output_folder_are_refused_before_measuring(tmp_path, monkeypatch, capsys):
    """Raw data and the tokenizer inside an earlier report's folder (and a step-time file):
    refused in one line before measuring, where the report once replaced the folder with them
    in it (exit 0)."""
    pytest.importorskip("tokenizers")
    from tests.faces.test_measure import make_texts, train_tokenizer

    _use(monkeypatch, notebooks_in(tmp_path / "nbs"))
    out = tmp_path / "report"
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "in.csv")
    assert cli.main(["--quiet", "report", str(src), "--out", str(out)]) == 0
    (out / "raw").mkdir()
    for i, text in enumerate(make_texts(20, seed=6)):
        (out / "raw" / f"{i}.txt").write_text(text)
    tokenizer = out / "tokenizer.json"
    train_tokenizer(vocab_size=300).save(str(tokenizer))
    outside = tmp_path / "tokenizer.json"
    train_tokenizer(vocab_size=300).save(str(outside))
    (out / "times.csv").write_text("batch_size,length,seconds\n1,10,0.1\n")
    before = _snapshot(out)
    raw = ["--quiet", "report", str(out / "raw"), "--no-cache"]
    cases = [
        ([*raw, "--tokenizer", str(tokenizer)], out / "raw"),
        (["--quiet", "report", str(src), "--tokenizer", str(tokenizer)], tokenizer),
        (["--quiet", "report", str(src), "--step-times", str(out / "times.csv")], out / "times.csv"),
    ]
    for argv, named in cases:
        capsys.readouterr()
        assert cli.main([*argv, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{named}: an input inside the output folder" in err[0], err
        assert _snapshot(out) == before
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing measured


def test_a_default_k_never_fails_and_a_given_one_says_how_to_fix_it(tmp_path, monkeypatch, capsys):
    """``report FILE`` on data of one distinct length once failed with "n_buckets = 6 exceeds
    the 1 distinct lengths" (a 6 the user never typed): on the user's data the report takes the
    gain rule's K and says so (the CLI, the summary page, recommendation.json); a given K above
    the distinct lengths is refused in one line suggesting --buckets auto; ``optimize`` and
    ``compare`` take every distinct length when there are fewer than their default 6."""
    _use(monkeypatch, notebooks_in(tmp_path / "nbs"))
    src = save_histogram(LengthHistogram.from_lengths([7] * 50), tmp_path / "same.csv")
    out = tmp_path / "report"
    assert cli.main(["--quiet", "report", str(src), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    rec = json.loads((out / "recommendation.json").read_text())
    reason = "K = 1 bucket, the gain rule suggests it (no --buckets given; --buckets K sets another)."
    assert rec["settings"]["n_buckets"] == 1 and rec["settings"]["n_buckets_asked"] is None
    assert rec["settings"]["n_buckets_reason"] == reason and reason in " ".join(said.split())
    assert reason in (out / "index.html").read_text()
    code = cli.main(["--quiet", "report", str(src), "--out", str(out), "--buckets", "6"])
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        code == 2
        and len(err) == 1
        and "exceeds the 1 distinct length" in err[0]
        and "--buckets auto" in err[0]
    )
    for command in ("optimize", "compare"):
        assert cli.main(["--quiet", command, str(src)]) == 0
        assert "the default 6 buckets exceed the data's 1 distinct length" in capsys.readouterr().out
        assert cli.main(["--quiet", command, str(src), "--buckets", "6"]) == 2
        assert capsys.readouterr().err.strip().splitlines() == err


def test_every_face_that_builds_batches_suggests_max_len_for_a_heavy_tail(tmp_path, monkeypatch, capsys):
    """One sample of 200,000 tokens among 2,000 of at most 900 (max > 4 x p99): optimize once built
    batches of 8 x 200,000 tokens without comment; every face now suggests --max-len p99 in
    one line, and none does on the same data clipped there."""
    _use(monkeypatch, notebooks_in(tmp_path / "nbs"))
    # 30 distinct lengths below the tail (multiples of 30): frontier and the report's summary
    # page search floors over the distinct lengths, a minute of CPU at ~800 of them
    lengths = np.r_[np.random.default_rng(9).integers(1, 31, 2_000) * 30, 200_000]
    hist = LengthHistogram.from_lengths(lengths)
    p99 = int(hist.quantile(0.99))
    src = save_histogram(hist, tmp_path / "tail.csv")
    hint = f"hint: the longest sample (200,000 tokens) is {200_000 / p99:,.1f}x the 99th percentile ({p99:,})"
    for command in ("optimize", "compare", "frontier"):
        argv = ["--quiet", command, str(src), "--buckets" if command != "frontier" else "--epochs", "2"]
        assert cli.main(argv) == 0
        said = " ".join(capsys.readouterr().out.split())
        assert hint in said and f"try --max-len {p99:,}" in said, command
        assert cli.main([*argv, "--max-len", str(p99)]) == 0
        assert "--max-len" not in capsys.readouterr().out
    out = tmp_path / "report"
    assert cli.main(["--quiet", "report", str(src), "--out", str(out), "--buckets", "2"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    rec = json.loads((out / "recommendation.json").read_text())
    assert rec["tail_hint"].startswith(hint) and hint in said
    assert f"try --max-len {p99:,}" in (out / "index.html").read_text()


@pytest.mark.parametrize(
    "said", ["Kernel died before replying to kernel_info", "Kernel didn't respond in 60 seconds"]
)
@pytest.mark.parametrize("failures, calls, raises", [(1, 2, False), (3, 3, True)])
def test_a_kernel_that_never_answered_starts_again(tmp_path, monkeypatch, said, failures, calls, raises):
    """A kernel that died or hung before it answered (over TCP, another process took its port)
    ran no cell and is started again, up to KERNEL_STARTS times (a failure in a cell is never
    retried)."""
    import papermill

    import analysis.report._notebooks as notebooks

    seen: list[str] = []

    def execute_notebook(src, dst, **_):
        seen.append(dst)
        if len(seen) <= failures:
            raise RuntimeError(said)
        Path(dst).write_text("ran", encoding="utf-8")

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    dst = tmp_path / "out.ipynb"
    run = lambda: notebooks.run_notebook(tmp_path / "in.ipynb", dst, {}, cwd=tmp_path, show_progress=False)  # noqa: E731
    if raises:
        with pytest.raises(RuntimeError, match=said):
            run()
    else:
        run()
        assert dst.read_text(encoding="utf-8") == "ran"
    assert len(seen) == calls == min(failures + 1, notebooks.KERNEL_STARTS)

    def cell_fails(src, dst, **_):
        seen.append(dst)
        raise RuntimeError("something else")

    seen.clear()
    monkeypatch.setattr(papermill, "execute_notebook", cell_fails)
    with pytest.raises(RuntimeError, match="something else"):
        run()
    assert len(seen) == 1


def test_a_notebooks_kernel_takes_unix_sockets_no_other_process_can_take(tmp_path):
    """The report's kernel listens on Unix sockets in a private folder (no TCP port another
    process could take between Jupyter's choice and the kernel's bind), its connection file
    beside them, and the folder is removed afterwards."""
    from analysis.report._notebooks import run_notebook

    nb = nbformat.v4.new_notebook()
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "import os\nfrom ipykernel.connect import get_connection_info\n"
            "info = get_connection_info(unpack=True)\n"
            "print(info['transport'], info['ip'], sorted(os.listdir(os.path.dirname(info['ip']))))"
        )
    )
    src, dst = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, src)
    run_notebook(src, dst, {}, cwd=tmp_path, show_progress=False)
    transport, ip, sockets = nbformat.read(dst, as_version=4).cells[0].outputs[0]["text"].split(" ", 2)
    assert transport == "ipc"
    assert sockets.strip() == str([*(f"kernel-{n}" for n in range(1, 6)), "kernel.json"])
    assert Path(ip).name == "kernel" and not Path(ip).parent.exists()


def test_a_folder_too_long_for_a_socket_leaves_the_kernel_on_tcp_with_its_connection_file_kept(tmp_path):
    """Where a socket's path would pass the Unix limit (about 104 bytes), the kernel keeps
    Jupyter's TCP ports (and its starts again); its connection file stays in the folder."""
    from analysis.report._notebooks import kernel_config

    for folder, sockets in [(tmp_path.anchor + "s" * 89, True), (tmp_path.anchor + "l" * 90, False)]:
        settings = kernel_config(folder).KernelManager
        assert len(os.fsencode(os.path.join(folder, "kernel-99"))) == (100 if sockets else 101)
        assert settings.connection_file == os.path.join(folder, "kernel.json")
        assert ("transport" in settings) is sockets


def test_nbvals_kernels_take_unix_sockets_too():
    """tests/kernel_files.py hands each of nbval's kernel managers its own sockets and
    connection file in a private folder, so the stored notebooks' runs under xdist cannot lose
    a port either."""
    import nbval.kernel

    first, second = (nbval.kernel.KernelManager(kernel_name="python3") for _ in range(2))
    assert first.transport == second.transport == "ipc" and Path(first.ip).parent.is_dir()
    assert first.ip != second.ip and Path(first.connection_file).parent == Path(first.ip).parent
