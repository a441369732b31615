"""The report: notebooks executed with papermill into a folder, and recommendation.json."""

from __future__ import annotations

import hashlib
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import numpy as np

from analysis import BatchRule, LengthHistogram, cli, save_histogram
from analysis.report import notebook_parameters, report_notebooks, run_report
from analysis.report._notebooks import notebook_title
from analysis.tables import format_count, format_percent, format_value

#: 2,000 lengths of 30 distinct values from 30 to 900, for the reports on tiny notebooks: their
#: cost is the summary page's frontier, whose floor search grows with the distinct lengths
#: (a 9 s search at ~800 of them, a tenth of a second at 30).
LENGTHS = np.random.default_rng(11).integers(1, 31, size=2_000) * 30


def _tiny_notebook(path, *, params: str, body: str) -> None:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# tiny"), cell, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_parameters_are_the_intersection_and_figures_come_in_png_and_svg(tmp_path):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _tiny_notebook(
        nbs / "01_a.ipynb",
        params="data_path = 'x'\nfigures_dir = None\n"
        "figure_formats = ['png']\nbatch_size = 1\n"
        "pad_to_multiple_of = 1\nmax_len = 1",
        body="from matplotlib.figure import Figure\n"
        "from analysis.plots import save_figure\n"
        "from analysis import load_lengths\n"
        "h = load_lengths(data_path)\n"
        "_ = save_figure(Figure(), 'tiny', figures_dir, formats=figure_formats)\n"
        "print(h.n_samples, batch_size, pad_to_multiple_of, max_len)",
    )
    _tiny_notebook(nbs / "02_b.ipynb", params="n_buckets = 2\nunrelated = 5", body="n_buckets")
    assert notebook_parameters(nbs / "01_a.ipynb") == [
        "data_path",
        "figures_dir",
        "figure_formats",
        "batch_size",
        "pad_to_multiple_of",
        "max_len",
    ]
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "in.csv")
    out = tmp_path / "out"
    result = run_report(
        src,
        out,
        n_buckets=3,
        rule=BatchRule(batch_size=4, pad_to_multiple_of=8),
        quiet=True,
        notebooks_dir=nbs,
        command="padding-workbench report in.csv --out out",
    )
    rec = json.loads((out / "recommendation.json").read_text())
    runs = {r["notebook"]: r for r in rec["notebooks"]}
    assert set(runs["01_a.ipynb"]["parameters"]) == {
        "data_path",
        "figures_dir",
        "figure_formats",
        "batch_size",
        "pad_to_multiple_of",
        "max_len",
    }
    assert runs["01_a.ipynb"]["parameters"]["figure_formats"] == ["png", "svg"]
    assert runs["01_a.ipynb"]["parameters"]["data_path"].startswith("/")
    assert runs["02_b.ipynb"]["parameters"] == {"n_buckets": 3}
    assert rec["figures"] == ["figures/tiny.png", "figures/tiny.svg"]
    assert rec["figures_missing_svg"] == []
    executed = nbformat.read(out / "01_a.ipynb", as_version=4)
    # no max_len: nothing is clipped and the notebooks get the longest length (a no-op clip)
    assert executed.cells[-1].outputs[0]["text"] == f"{len(LENGTHS)} 4 8 {LENGTHS.max()}\n"
    assert rec["settings"]["max_len"] is None and rec["data"]["clipping"] is None
    assert rec["plan"]["edges"][-1] == LENGTHS.max()  # the plan reaches the longest sample
    assert (nbs / "01_a.ipynb").read_text().count('"outputs": []') == 2  # never in place
    assert {p.name for p in result.files} >= {
        "01_a.ipynb",
        "01_a.html",
        "02_b.ipynb",
        "02_b.html",
        "recommendation.json",
        "lengths.csv",
    }
    assert rec["command"] == "padding-workbench report in.csv --out out"
    assert rec["plan"]["pad_to_multiple_of"] == 8 and rec["plan"]["n_buckets"] == 3
    assert list(rec["strategies"]) == ["random", "sorted", "bucketed"]
    assert rec["strategies"]["bucketed"]["efficiency"] == rec["plan"]["efficiency"]
    assert rec["exports"]["nemo"]["bucket_batch_size"] == [4, 4, 4]
    assert rec["throughput"] is None and rec["step_time"] is None and rec["n_buckets_suggested"] >= 1
    assert all(isinstance(k, str) for k in rec["optimal_efficiency_by_n_buckets"])


def test_failing_notebook_is_one_line_through_the_cli(tmp_path, capsys, monkeypatch):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _tiny_notebook(nbs / "01_bad.ipynb", params="seed = 0", body="1 / 0")
    monkeypatch.setattr("analysis.report._folder.NOTEBOOKS_DIR", nbs)  # the default run_report reads
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "in.csv")
    code = cli.main(["--quiet", "report", str(src), "--out", str(tmp_path / "out"), "--buckets", "2"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "01_bad.ipynb failed" in err and "ZeroDivisionError" in err


def test_the_real_notebooks_are_there():
    names = [p.name for p in report_notebooks()]
    assert names and names == sorted(names)
    assert "03_bucket_count.ipynb" in names


def test_report_on_the_real_notebooks_leaves_every_promised_file(shared_report):
    out, max_len = shared_report.out, shared_report.max_len
    assert 8_192 < max_len < shared_report.lengths.max()  # clipped, and still beyond the case
    notebooks = [p.name for p in report_notebooks()]
    for name in notebooks:
        assert (out / name).is_file() and (out / name).with_suffix(".html").is_file()
    rec = json.loads((out / "recommendation.json").read_text())
    pngs = sorted(p.stem for p in (out / "figures").glob("*.png"))
    svgs = sorted(p.stem for p in (out / "figures").glob("*.svg"))
    assert pngs and pngs == svgs
    assert rec["settings"]["max_len"] == max_len and rec["n_buckets"] == shared_report.n_buckets
    assert rec["data"]["clipping"]["max_len"] == max_len
    assert rec["data"]["clipping"]["samples_clipped"] == np.sum(shared_report.lengths > max_len) > 0
    assert rec["data"]["summary"]["max"] == shared_report.lengths.max()  # notebooks read the raw data
    assert rec["plan"]["edges"][-1] == max_len
    assert set(rec["strategies"]) == {"random", "sorted", "bucketed"}
    predicted = rec["throughput"]["predicted_tokens_per_s"]
    assert predicted[shared_report.reference_strategy] == shared_report.tokens_per_s
    assert rec["step_time"] is None  # no --step-times: notebook 04 did not run
    assert rec["command"].startswith("padding-workbench --quiet report ")
    assert rec["version"] and [r["notebook"] for r in rec["notebooks"]] == notebooks
    for run in rec["notebooks"]:
        if "data_path" in run["parameters"]:
            assert run["parameters"]["data_path"] == str(out / "data" / "lengths.csv")


def test_report_with_a_token_budget_on_data_longer_than_the_case(shared_report):
    """Two paths that once failed inside the notebooks: the max_tokens rule (batch_size is
    then None) and lengths beyond 8,192 (the shared report has both)."""
    rec = json.loads((shared_report.out / "recommendation.json").read_text())
    max_tokens = shared_report.max_tokens
    assert rec["plan"]["max_tokens"] == max_tokens and rec["plan"]["edges"][-1] == shared_report.max_len
    assert rec["plan"]["batch_sizes"] == [max_tokens // e for e in rec["plan"]["edges"][1:]]
    params = {r["notebook"]: r["parameters"] for r in rec["notebooks"]}
    assert params["03_bucket_count.ipynb"]["n_buckets"] == shared_report.n_buckets  # the CLI's K
    assert params["03_bucket_count.ipynb"]["max_tokens"] == max_tokens
    assert params["03_bucket_count.ipynb"]["batch_size"] is None


def test_a_report_is_reproducible_byte_for_byte(shared_report):
    """Same command twice: identical figures (PNG and SVG) and a recommendation.json that
    differs only in the output folder's path."""
    first, second = shared_report.out, shared_report.repeat
    figures = sorted(p.name for p in (first / "figures").iterdir())
    assert figures == sorted(p.name for p in (second / "figures").iterdir())
    assert any(f.endswith(".svg") for f in figures) and any(f.endswith(".png") for f in figures)
    for name in figures:
        assert (first / "figures" / name).read_bytes() == (second / "figures" / name).read_bytes(), name
    a = (first / "recommendation.json").read_text().replace(str(first), "OUT")
    b = (second / "recommendation.json").read_text().replace(str(second), "OUT")
    assert a == b


def test_save_figure_formats_are_a_parameter(tmp_path):
    from matplotlib.figure import Figure

    from analysis.plots import save_figure

    assert [p.name for p in save_figure(Figure(), "a", tmp_path)] == ["a.png"]
    assert [p.name for p in save_figure(Figure(), "b", tmp_path, formats=["png", ".SVG"])] == [
        "b.png",
        "b.svg",
    ]
    assert [p.name for p in save_figure(Figure(), "c", tmp_path, formats="pdf")] == ["c.pdf"]
    assert b"<svg" in (tmp_path / "b.svg").read_bytes()[:400]
    assert save_figure(Figure(), "d", None, formats=["png"]) == []  # no folder, nothing saved
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.png", "b.svg", "c.pdf"]


# ------------------------------------------------------------------------ the HTML pages
class _Links(HTMLParser):
    """Every URL an HTML page names: ``(tag, attribute, value)``, plus CSS ``url()`` and
    ``@import`` targets in style elements and attributes (as ``("css", "url", value)``)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str, str]] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        self._in_style = tag == "style"
        for name, value in attrs:
            if value is None:
                continue
            if name in {"src", "href", "xlink:href", "srcset", "poster", "data", "action", "formaction"}:
                self.links.append((tag, name, value.strip()))
            if name == "style":
                self._css(value)

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self._css(data)

    def _css(self, text):
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # comments name sites, load nothing
        urls = re.findall(r"url\(\s*['\"]?([^'\")]+)", text)
        for value in urls + re.findall(r"@import\s+['\"]([^'\"]+)", text):
            self.links.append(("css", "url", value.strip()))


def _is_external(value: str) -> bool:
    """A URL that reaches outside the report folder: a scheme (``https:``, ``file:``...) other
    than ``data:``, or a protocol-relative ``//host``."""
    return value.startswith("//") or (
        re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", value) is not None and not value.startswith("data:")
    )


def external_loads(page: str) -> list[str]:
    """What a page would fetch from outside its folder.  The rule: a page may *link* to the web
    (``<a href="https://...">``: opened only when the reader clicks) but loads nothing from it:
    every other ``src``/``href`` (scripts, style sheets, images, frames, SVG ``xlink:href``)
    and every CSS ``url()``/``@import`` is relative or ``data:``."""
    parser = _Links()
    parser.feed(page)
    return [
        f"<{tag} {attr}={value!r}>"
        for tag, attr, value in parser.links
        if _is_external(value) and not (tag == "a" and attr == "href")
    ]


def _relative_links(page: str) -> list[str]:
    parser = _Links()
    parser.feed(page)
    return [v for tag, attr, v in parser.links if tag == "a" and attr == "href" and not _is_external(v)]


def test_external_loads_are_found():
    page = (
        "<script src='https://cdn/x.js'></script><link href='//cdn/y.css'>"
        "<img src='data:image/png;base64,AA'>"
        "<a href='https://example.org'>docs</a><style>/* https://site */ p{background:url(http://z/i.png)}</style>"
    )
    assert external_loads(page) == [
        "<script src='https://cdn/x.js'>",
        "<link href='//cdn/y.css'>",
        "<css url='http://z/i.png'>",
    ]


def test_every_page_of_the_report_is_offline_titled_and_linked(shared_report):
    out = shared_report.out
    pages = sorted(out.glob("*.html"))
    names = [p.name for p in report_notebooks()]
    expected = ["index.html", *(Path(n).with_suffix(".html").name for n in names)]
    assert [p.name for p in pages] == sorted(expected)
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert external_loads(text) == [], page.name
        assert "<script" not in text, page.name  # no page needs a script
        for href in _relative_links(text):
            target = href.split("#")[0]
            assert not target or (out / target).is_file(), (page.name, href)  # no link to .ipynb
    for at, name in enumerate(names):
        text = (out / name).with_suffix(".html").read_text(encoding="utf-8")
        title = notebook_title(Path("notebooks") / name)
        assert f"<title>{html.escape(title)} — lengths.csv</title>" in text
        assert "Report on <b>lengths.csv</b>" in text  # the source file, named at the top
        assert "not shown" not in text and "`n_buckets`" not in text and "K = <code>" not in text
        # code hidden by default: a checkbox before <main> and the CSS rule it drives
        assert re.search(r'<body[^>]*>\s*<input [^>]*id="report-show-code"[^>]*>\s*<nav', text)
        assert ":not(:checked) ~ main .jp-CodeCell > .jp-Cell-inputWrapper { display: none; }" in text
        following = names[at + 1] if at + 1 < len(names) else None
        next_href = "index.html" if following is None else Path(following).with_suffix(".html").name
        assert f'class="report-next" href="{next_href}"' in text
    explorer = (out / "03_bucket_count.html").read_text(encoding="utf-8")
    assert "widget-view+json" not in explorer and "widget-state+json" not in explorer
    assert re.search(r"<pre>Explorer\(optimal, 3 buckets: efficiency \d", explorer)  # its static status


def _strategy_steps(notebook: Path) -> dict[str, str]:
    """The ``steps`` column of an executed notebook 02's strategy table, as it prints, by strategy."""
    nb = nbformat.read(notebook, as_version=4)
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and "compare_strategies(" in c.source]
    (page,) = [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]
    header = re.findall(r"<th>(.*?)</th>", page.split("</tr>")[0])  # ["", "batch_rule", ...]
    rows = re.findall(r"<tr>\s*<th>(\w+)</th>(.*?)</tr>", page, re.S)
    column = header.index("steps") - 1
    return {name: re.findall(r"<td>(.*?)</td>", cells)[column] for name, cells in rows if "<td>" in cells}


def test_the_summary_page_answers_for_this_file(shared_report):
    out = shared_report.out
    rec = json.loads((out / "recommendation.json").read_text())
    index = (out / "index.html").read_text(encoding="utf-8")
    src = out.parent / "lengths.csv"  # the file the shared report read
    assert "<title>Summary — lengths.csv</title>" in index
    assert hashlib.sha256(src.read_bytes()).hexdigest() in index
    assert f"{src.stat().st_size:,} bytes" in index
    plan = rec["plan"]
    assert f"max_tokens {shared_report.max_tokens:,}" in index
    assert format_value(plan["edges"]) in index and format_value(plan["batch_sizes"]) in index
    strategies = rec["strategies"]
    for name in ("random", "sorted", "bucketed"):
        assert format_percent(strategies[name]["efficiency"]) in index
    # a token budget: the answer is in steps and budget fill (here the plan pads more than a
    # shuffle of one sample per batch, so "fewer padded tokens" would be negative)
    assert plan["objective_kind"] == "steps" and "fewer padded tokens" not in index
    # ... against what a team would run under a token budget (dynamic batching, packing), not a
    # shuffle whose one batch size must fit the longest sample
    answer = index.split('<p class="answer">')[1].split("</p>")[0]
    assert f"<b>{format_count(plan['n_batches'])}</b> steps per epoch" in answer
    steps = _strategy_steps(out / "02_strategies.ipynb")  # notebook 02's table (one rank: steps = batches)
    assert f"dynamic batching (token_budget) takes {steps['token_budget']} steps" in answer
    assert f"packing takes {steps['packing']} steps" in answer
    assert "full shuffle" not in answer
    assert rec["tradeoff"]["sentence"] in index.replace("&#x27;", "'")  # one computation, one sentence
    assert f"budget fill <b>{format_percent(plan['budget_fill'])}</b>" in index
    # a calibration was given (sorted at 10,000 tokens/s): the speed-up in tokens/s, from it
    predicted = rec["throughput"]["predicted_tokens_per_s"]
    assert f"bucketed {format_count(predicted['bucketed'])} tokens/s" in index
    assert f"<b>{format_value(predicted['bucketed'] / predicted['random'])}×</b> over a full shuffle" in index
    assert "length variance a batch keeps" in index and "bucketed plan" in index
    k, suggested = rec["n_buckets"], rec["n_buckets_suggested"]
    assert f"this report uses <b>K = {k}</b>" in index
    if suggested != k:
        assert f"suggests <b>K = {suggested}</b>" in index and "<code>--buckets auto</code>" in index
    for run in rec["notebooks"]:
        assert f"href='{run['html']}'" in index
    assert "href='recommendation.json'" in index and "04_throughput.ipynb: not run" in index


def test_the_summary_page_escapes_names_and_says_in_memory(tmp_path):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _tiny_notebook(nbs / "01_a.ipynb", params="seed = 0", body="print(seed)")
    src = save_histogram(LengthHistogram.from_lengths(LENGTHS), tmp_path / "l<e>n&'s.csv")
    out = tmp_path / "out"
    run_report(src, out, n_buckets=2, quiet=True, notebooks_dir=nbs, command="report <x>")
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "l&lt;e&gt;n&amp;&#x27;s.csv" in index and "l<e>n" not in index
    assert '<code class="command">report &lt;x&gt;</code>' in index
    assert "padded-token ratio" in index  # neither step times nor a calibration
    page = (out / "01_a.html").read_text(encoding="utf-8")
    # nbconvert re-serialises the page: an apostrophe in text needs no escape
    assert "<title>tiny — l&lt;e&gt;n&amp;'s.csv</title>" in page and "l<e>n" not in page
    assert "Report on <b>l&lt;e&gt;n&amp;'s.csv</b>" in page
    run_report(LENGTHS, out, n_buckets=2, quiet=True, notebooks_dir=nbs)
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "in-memory ndarray (no file: no size or checksum)" in index


def test_no_notebook_needs_math_rendering():
    """No MathJax is loaded, so no Markdown cell may hold TeX math."""
    for path in sorted(Path("notebooks").glob("[0-9]*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "markdown":
                assert not re.search(r"\$[^$\s]|\\\(|\\\[", cell.source), path.name
