"""A design-review report: every notebook run on *your* lengths, plus a recommendation.

:func:`run_report` (the CLI's ``report`` subcommand, and ``make report``) does, in order,
all of it in a hidden staging folder beside ``DIR`` that is moved into place as ``DIR`` only
once complete (an earlier report there stays as it was until then, and an interrupted run
leaves it so; ``DIR`` must be new, empty or an earlier report's, and hold none of the inputs:
:mod:`analysis.report._folder`):

1. load the lengths (any source :func:`analysis.load_lengths` reads; under a token budget a
   sample longer than ``max_tokens`` is refused in one line, :func:`analysis.batching.check_budget`,
   as ``optimize`` and ``compare`` refuse it) and write their
   histogram to ``DIR/data/lengths.csv``, the one file every notebook then reads;
2. compute the recommendation with the engine (:func:`analysis.recommend`: the plan for
   ``n_buckets`` buckets, the exact padding of random, sorted and bucketed batching, the
   optimal efficiency for every K), plus predicted throughput when a calibration is given;
3. execute each ``notebooks/NN_*.ipynb`` (sorted) with papermill into ``DIR`` (never in
   place), injecting only the parameters its ``parameters`` cell defines, with absolute
   paths, kernel ``python3`` of this environment and the notebooks folder as working
   directory; figures are saved by the notebooks into ``DIR/figures`` as PNG and SVG
   (parameters ``figures_dir`` and ``figure_formats``).  Offered parameters: ``data_path``,
   ``figures_dir``, ``figure_formats``, ``max_len``, ``batch_size``, ``max_tokens``,
   ``pad_to_multiple_of``, ``n_buckets``, ``seed``, ``method``, ``edges`` (the recommended
   plan's), with a calibration ``reference_strategy`` and ``reference_tokens_per_s``, and
   with measured step times ``step_times_path`` (a notebook whose parameters cell defines
   ``step_times_path``, ``04_throughput.ipynb``, runs only when step times are given);
4. convert each executed notebook to its HTML page (nbconvert's ``HTMLExporter`` with the
   ``report`` template: offline, titled with the notebook and the source file, code hidden
   until the reader shows it, a link to the next page);
5. write ``DIR/recommendation.json``: data summary, settings (defaults included), edges,
   batch sizes, expected efficiencies (and under a token budget the budget fill, the steps
   and the plan's ``warnings``), predicted throughput, exports for trainers, the
   notebooks and figures produced, the exact command line and the package version;
6. write ``DIR/index.html``, the summary page (:mod:`analysis.report._index`): the answer
   for this file (its name, size and SHA-256, the rule, the plan, efficiency against random
   and sorted, the padded tokens saved (under a token budget: the steps and the budget fill,
   and the plan's warnings, one line each), the expected speed-up, the mixing kept, the K used
   and the K suggested), then links to every page and to ``recommendation.json``.

Papermill, nbconvert and nbformat are imported in :mod:`analysis.report._notebooks` only (they are dev/report
dependencies), never by the engine.
"""

from __future__ import annotations

from analysis.report._context import Measured, tokenizer_digest
from analysis.report._folder import check_inputs, check_output_folder
from analysis.report._notebooks import STEP_TIMES_PARAMETER, notebook_parameters, report_notebooks
from analysis.report._run import ReportResult, run_report

__all__ = [
    "ReportResult",
    "run_report",
    "Measured",
    "tokenizer_digest",
    "check_inputs",
    "check_output_folder",
    "notebook_parameters",
    "report_notebooks",
    "STEP_TIMES_PARAMETER",
]
