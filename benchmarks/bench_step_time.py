"""Benchmark: does the step-time model predict the tokens/s of a real training run?

Trains a small decoder-only transformer (PyTorch; ``--layers`` blocks of width ``--width``,
causal attention with a padding mask through ``scaled_dot_product_attention``, AdamW) on
random tokens shaped like two real length distributions, and for each batching strategy
(padded: sorted, random, bucketed with edges optimised for time, length_grouped,
token_budget; packed: packing, packing_bfd, packing_first_fit, packing_next_fit)

1. calibrates once (two rounds of :func:`analysis.measure_step_times` on
   :func:`analysis.calibration_shapes` of both distributions) for the model whose edges the
   bucketed runs use;
2. builds one epoch of each strategy on a subsample, every batch padded to its longest sample
   with a padding mask and a masked loss, and a second epoch of identical batches for two
   strategies (the run-to-run noise, measured the same way);
3. times, in one seeded random order, every batch of every epoch ``--batch-repeats`` times
   (default 3) and four more rounds of the calibration shapes (three with ``--quick``), each
   step alone (see Clock below): the machine's drift (shared cores, caches, clock) falls on
   every strategy and on the calibration alike, instead of on whichever ran last, and a burst
   of noise on one timing of a batch does not move its strategy; the model of the
   predictions is fitted to these calibration steps (each shape's median), for a few model
   forms (the residuals pick the form), and ``drift`` is how much slower the session's
   second half ran than its first;
4. compares each strategy's measured useful tokens/s (its tokens over the sum of its
   batches' times, a batch's time the median of its repeats; ``noise``: the same for the
   second run of identical batches, from its own repeats)
   with the step-time model's a-priori prediction (:func:`analysis.predict_strategy_throughput`:
   exact for sorted/random/bucketed, over simulated epochs for the others), with the model
   applied to the very batches that ran, and with the padded-token prediction calibrated on
   the measured sorted run; and anchors the step-time prediction on the measured sorted run
   (as the padded-token one is).

A packed step is one row of the token budget holding whole samples, with position ids
restarting in each and attention restricted to each sample (block-diagonal and causal): on
the CPU a loop of ``scaled_dot_product_attention(..., is_causal=True)`` over the samples (the
row's q, k and v split once into them); on
a GPU FlashAttention's ``flash_attn_varlen_func`` when ``flash_attn`` imports, else one SDPA
call with a block-diagonal causal mask, under bf16 autocast (fp16 where bf16 is missing).
The tail of a row past its last sample is padding: it runs through every layer but attends
nothing, and its tokens are in the loss's ignore mask.  The calibration measures packed
shapes too (``calibration_shapes(..., packed=True)``), so the model fits ``per_segment``.

Run from the repository root (CPU, one thread: about 0.35 s a step; ``--scale 0.3
--calibration-lengths 5`` times about 2,000 steps with the default 3 batch repeats, full size
about 5,800)::

    .venv/bin/python benchmarks/bench_step_time.py --threads 1 --out data
    python benchmarks/bench_step_time.py --device cuda --quick --out OUT_DIR

Writes ``step_times_{device}.csv`` (the calibration), ``step_time_validation.csv`` (one row
per distribution and strategy; ``batch_spread``: the median over its batches of the std /
mean of their repeats) and ``step_time_batches.csv`` (every timed batch step: distribution,
strategy, run, batch, repeat, position in the session, seconds, and the batch's shape:
``samples`` and ``longest`` when padded, ``segments`` and ``square_sum`` when packed, its
useful ``tokens`` and ``predicted_seconds``, to audit or redo the aggregation) to ``--out``
(``_cuda`` suffix on a GPU for the last two).

Clock: on the CPU with one thread the default is the process's CPU time
(``time.process_time``): on shared cores other jobs stretch wall time by whatever they do,
while CPU seconds are what the model and the batches cost (on a dedicated core the two
agree).  ``--clock wall`` for wall time; a GPU run always uses the wall clock.  The optimiser
(the bucketed edges) runs numba's parallel kernels on its ``workqueue`` threading layer
(unless ``NUMBA_THREADING_LAYER`` says otherwise): on the ``omp`` layer a worker thread it
left behind kept spinning through the torch steps, about 0.8 of a core, which the process's
CPU clock counted into every step (and which took the second core from the steps).  The
session prints the CPU seconds of the process's threads other than the stepping one.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path

import numba
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from _common import SHARED_DATA
from torch import nn

from analysis import (
    BatchRule,
    LengthHistogram,
    StepTimeModel,
    calibration_shapes,
    measure_step_times,
    optimize_edges,
    predict_strategy_throughput,
)
from analysis.simulation.strategies import build_epoch

PADDED = ("sorted", "random", "bucketed", "length_grouped", "token_budget")
PACKED = ("packing", "packing_bfd", "packing_first_fit", "packing_next_fit")
STRATEGIES = PADDED + PACKED
#: Strategies whose identical batches run twice to measure the run-to-run noise.
REPEATED = ("sorted", "bucketed")
#: Model forms compared by their residuals (terms, tile), simplest first.
FORMS = (
    (("per_token",), 1),
    (("per_step", "per_token"), 1),
    (("per_step", "per_token", "attention"), 1),
    (("per_step", "per_sample", "per_token", "attention"), 1),
    (("per_step", "per_token", "attention", "working_set"), 1),
    (("per_step", "per_sample", "per_token", "attention", "working_set"), 1),
    (("per_step", "per_sample", "per_token", "attention", "working_set"), 16),
    (("per_step", "per_sample", "per_token", "attention", "working_set"), 64),
)
#: With packed steps measured, every form also fits the per-segment term.
FORMS_PACKED = tuple(((*terms, "per_segment"), tile) for terms, tile in FORMS)
VOCAB = 512
MAX_LEN = 1024
N_BUCKETS = 4


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention with a padding mask, then an MLP."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, segments: list[int] | None = None
    ) -> torch.Tensor:
        b, n, w = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        a = (
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            if segments is None
            else packed_attention(q, k, v, segments, mask)
        )
        x = x + self.out(a.transpose(1, 2).reshape(b, n, w))
        y: torch.Tensor = x + self.down(F.gelu(self.up(self.ln2(x))))
        return y


def flash_varlen() -> object | None:
    """FlashAttention's variable-length kernel, when ``flash_attn`` is installed (GPU only)."""
    try:
        from flash_attn import flash_attn_varlen_func  # type: ignore[import-not-found]
    except ImportError:
        return None
    func: object = flash_attn_varlen_func
    return func


def block_diagonal_mask(segments: list[int], n: int, device: torch.device) -> torch.Tensor:
    """The causal mask of a packed row of ``n`` tokens (1 x 1 x n x n): each sample attends to
    itself only; the padding tail is a block of its own (its outputs feed no loss)."""
    sample = torch.repeat_interleave(
        torch.arange(len(segments) + 1, device=device),
        torch.tensor([*segments, n - sum(segments)], device=device),
    )
    causal = torch.ones(n, n, dtype=torch.bool, device=device).tril()
    return (causal & (sample[:, None] == sample[None, :]))[None, None]


def packed_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, segments: list[int], mask: torch.Tensor | None
) -> torch.Tensor:
    """Causal attention restricted to each sample of a packed row (``q``: 1 x heads x N x d;
    ``segments``: the samples' lengths, back to back from position 0; the rest is padding,
    which attends nothing).  ``mask``: a block-diagonal causal mask (one SDPA call, GPU), or
    None: FlashAttention's varlen kernel if importable, else a loop of SDPA over the samples."""
    if mask is not None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    varlen = flash_varlen() if q.is_cuda else None
    if varlen is not None:
        cu = torch.tensor(np.cumsum([0, *segments]), dtype=torch.int32, device=q.device)
        end = int(cu[-1])
        out = torch.zeros_like(q)
        packed = varlen(
            *(t[0, :, :end].transpose(0, 1).contiguous() for t in (q, k, v)),
            cu,
            cu,
            max(segments),
            max(segments),
            causal=True,
        )  # type: ignore[operator]
        out[0, :, :end] = packed.transpose(0, 1)
        return out
    # one split per tensor, not a slice per sample: a slice's backward writes a zero gradient
    # of the whole row, so a loop of slices costs (samples x row) in the backward pass, while a
    # split's backward is one concatenation of the samples' gradients
    n, used = q.shape[2], sum(segments)
    sizes = [*segments, n - used] if used < n else list(segments)
    qs, ks, vs = (torch.split(t, sizes, dim=2) for t in (q, k, v))
    parts = [
        F.scaled_dot_product_attention(qs[s], ks[s], vs[s], is_causal=True) for s in range(len(segments))
    ]
    if used < n:
        parts.append(torch.zeros_like(qs[-1]))
    return torch.cat(parts, dim=2)


class Decoder(nn.Module):
    """A small decoder-only language model with tied input and output embeddings."""

    def __init__(self, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, width), nn.Embedding(MAX_LEN, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)

    def forward(self, ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        n = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(n, device=ids.device))
        causal = torch.ones(n, n, dtype=torch.bool, device=ids.device).tril()
        mask = (causal[None] & valid[:, None, :])[:, None]  # (B, 1, L, L): causal and not padding
        for block in self.blocks:
            x = block(x, mask)
        logits: torch.Tensor = self.ln(x) @ self.tok.weight.T
        return logits

    def forward_packed(
        self, ids: torch.Tensor, position_ids: torch.Tensor, segments: list[int]
    ) -> torch.Tensor:
        """One packed row (``ids``: 1 x N): position ids restart in each sample, attention
        stays inside it (:func:`packed_attention`)."""
        x = self.tok(ids) + self.pos(position_ids)
        mask = None
        if ids.is_cuda and flash_varlen() is None:  # one SDPA call with a block-diagonal mask
            mask = block_diagonal_mask(segments, ids.shape[1], ids.device)
        for block in self.blocks:
            x = block(x, mask, segments)
        logits: torch.Tensor = self.ln(x) @ self.tok.weight.T
        return logits


class Trainer:
    """One training step on a batch of given sample lengths (padded to the longest)."""

    def __init__(self, device: str, width: int, layers: int, seed: int) -> None:
        torch.manual_seed(seed)
        self.device = torch.device(device)
        self.model = Decoder(width, layers, heads=4).to(self.device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.gen = torch.Generator(device=self.device).manual_seed(seed)
        # fp16 autocast needs a loss scaler; bf16 and the CPU's float32 do not (it is then a no-op)
        fp16 = self.device.type == "cuda" and not torch.cuda.is_bf16_supported()
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=fp16)

    def _autocast(self) -> contextlib.AbstractContextManager[object]:
        if self.device.type != "cuda":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.autocast(device_type="cuda", dtype=dtype)

    def _update(self, logits: torch.Tensor, targets: torch.Tensor) -> None:
        loss = F.cross_entropy(logits.reshape(-1, VOCAB).float(), targets.reshape(-1), ignore_index=-100)
        self.opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()  # type: ignore[no-untyped-call]
        self.scaler.step(self.opt)
        self.scaler.update()
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def run(self, lengths: np.ndarray) -> None:
        """Forward, masked loss, backward, AdamW step; returns when the device is done."""
        b, n = len(lengths), int(lengths.max())
        ids = torch.randint(0, VOCAB, (b, n), generator=self.gen, device=self.device)
        valid = (
            torch.arange(n, device=self.device)[None, :]
            < torch.as_tensor(lengths, device=self.device)[:, None]
        )
        targets = ids[:, 1:].masked_fill(~valid[:, 1:], -100)
        with self._autocast():
            logits = self.model(ids, valid)[:, :-1]
        self._update(logits, targets)

    def run_packed(self, lengths: np.ndarray, capacity: int) -> None:
        """A packed step: one row of ``capacity`` tokens holding the samples of ``lengths``
        back to back (position ids restarting in each, no target across samples, the tail
        padding), as transformers' ``DataCollatorWithFlattening`` builds it plus the tail."""
        segments = [int(v) for v in lengths]
        used = sum(segments)
        ids = torch.randint(0, VOCAB, (1, capacity), generator=self.gen, device=self.device)
        position_ids = torch.zeros(capacity, dtype=torch.long)
        position_ids[:used] = torch.cat([torch.arange(v) for v in segments])
        targets = ids[:, 1:].clone()
        starts = np.cumsum([0, *segments[:-1]])
        first = torch.as_tensor(starts[1:] - 1, dtype=torch.long, device=self.device)  # a first token
        targets[0, first] = -100
        targets[0, used - 1 :] = -100  # the tail predicts nothing
        with self._autocast():
            logits = self.model.forward_packed(ids, position_ids[None].to(self.device), segments)[:, :-1]
        self._update(logits, targets)

    def step(self, batch_size: int, length: int, segment_length: int | None = None) -> None:
        """A step of the calibration's shape: ``batch_size`` samples padded to ``length``, or
        (``segment_length``) ``batch_size`` packed rows of ``length`` tokens flattened into
        one, samples of ``segment_length`` tokens (:func:`analysis.measure_step_times`)."""
        if segment_length is not None:
            k = batch_size * (length // segment_length)
            self.run_packed(np.full(k, segment_length), batch_size * length)
            return
        lengths = np.full(batch_size, length)
        lengths[1:] = np.maximum(1, length // 2)  # a real padding mask; cost is the shape's
        self.run(lengths)


def fit_forms(times: pd.DataFrame) -> tuple[StepTimeModel, pd.DataFrame]:
    """Fit every form in FORMS; pick the simplest within 10 % of the best RMS residual."""
    rows, models = [], []
    packed = "segment_length" in times.columns and bool(times["segment_length"].any())
    for terms, tile in FORMS_PACKED if packed else FORMS:
        model = StepTimeModel.fit(times, terms=terms, tile=tile)
        models.append(model)
        rows.append(
            {
                "terms": "+".join(terms),
                "tile": tile,
                "rms_relative_residual": model.rms_relative_residual,
                "max_relative_residual": float(model.residuals()["relative_residual"].abs().max()),
            }
        )
    table = pd.DataFrame(rows)
    best = table["rms_relative_residual"].min()
    pick = int(np.flatnonzero(table["rms_relative_residual"] <= 1.1 * best)[0])
    table["chosen"] = np.arange(len(table)) == pick
    return models[pick], table


def add_anchored(frame: pd.DataFrame) -> pd.DataFrame:
    """The step-time prediction anchored on the measured sorted run of each distribution, as
    the padded-token prediction is: ``predicted * measured_sorted / predicted_sorted``.  It
    cancels a drift of the machine's speed between calibration and runs (one factor for all
    strategies) and keeps what the model says about one strategy relative to another."""
    out = frame.copy()
    for _, rows in out.groupby("distribution"):
        ref = rows[rows["strategy"] == "sorted"].iloc[0]
        factor = ref["measured_tokens_per_s"] / ref["predicted_tokens_per_s"]
        out.loc[rows.index, "anchored_tokens_per_s"] = rows["predicted_tokens_per_s"] * factor
    out["anchored_error"] = out["anchored_tokens_per_s"] / out["measured_tokens_per_s"] - 1
    return out


def positive_int_arg(text: str) -> int:
    """An argparse type: an integer >= 1 (else argparse's one-line message and exit 2)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def relative_spread(timings: np.ndarray) -> np.ndarray:
    """Per row of ``timings`` (one row per batch, one column per repeat): std / mean of its
    repeats (``ddof=1``: the measure :meth:`StepTimeModel.residuals` calls ``spread``); NaN
    with one repeat."""
    if timings.shape[1] < 2:
        return np.full(timings.shape[0], np.nan)
    return np.asarray(timings.std(axis=1, ddof=1) / timings.mean(axis=1))


def batch_table(
    keys: list[tuple[str, str, int, int]],
    timings: np.ndarray,
    positions: np.ndarray,
    features: dict[tuple[str, str], pd.DataFrame],
) -> pd.DataFrame:
    """One row per timed batch step (``keys[i]`` repeated ``timings.shape[1]`` times): its
    distribution, strategy, run, batch index, repeat, position in the session, seconds, and
    the batch's shape from ``features`` (padded: ``samples``, ``longest``; packed:
    ``segments``, ``square_sum``; both: ``tokens``, ``predicted_seconds``)."""
    n_rep = timings.shape[1]
    frame = pd.DataFrame(
        np.repeat(np.array(keys, dtype=object), n_rep, axis=0),
        columns=["distribution", "strategy", "run", "batch"],
    ).astype({"run": np.int64, "batch": np.int64})
    frame["repeat"] = np.tile(np.arange(n_rep), len(keys))
    frame["position"] = positions
    frame["seconds"] = timings.reshape(-1)
    shape = pd.concat(
        [features[name, strategy].iloc[[b]] for name, strategy, _, b in keys], ignore_index=True
    )
    shape = shape.loc[shape.index.repeat(n_rep)].reset_index(drop=True)
    return pd.concat([frame, shape], axis=1)


def epoch_features(
    sub: np.ndarray, batches: list[np.ndarray], packed: bool, budget: int, model: StepTimeModel
) -> pd.DataFrame:
    """Per batch of one epoch: what the model prices (padded: ``samples`` padded to
    ``longest``; packed: ``segments`` whose squares sum to ``square_sum`` in one row of
    ``budget`` tokens), its useful ``tokens`` and the model's ``predicted_seconds``."""
    sizes = np.array([b.size for b in batches], dtype=np.int64)
    tokens = np.array([int(sub[b].sum()) for b in batches], dtype=np.int64)
    missing = pd.array([pd.NA] * len(batches), dtype="Int64")
    if packed:
        squares = np.array([int((sub[b].astype(np.int64) ** 2).sum()) for b in batches], dtype=np.int64)
        predicted = np.asarray(model.predict_packed(sizes, squares.astype(float), budget))
        cols = {"samples": missing, "longest": missing, "segments": sizes, "square_sum": squares}
    else:
        longest = np.array([int(sub[b].max()) for b in batches], dtype=np.int64)
        predicted = np.asarray(model.predict(sizes, longest))
        cols = {"samples": sizes, "longest": longest, "segments": missing, "square_sum": missing}
    return pd.DataFrame({**cols, "tokens": tokens, "predicted_seconds": predicted}).astype(
        {k: "Int64" for k in cols}
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--quick", action="store_true", help="small subsamples and calibration")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument(
        "--data-dir", type=Path, default=SHARED_DATA, help="folder with gsm8k.npy and alpaca_eval_outputs.npy"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("benchmarks/_work"),
        help="where the CSVs go (default: benchmarks/_work; --out data refreshes the committed ones)",
    )
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--no-packed",
        dest="packed",
        action="store_false",
        help="padded strategies only (the calibration without packed shapes)",
    )
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default=None,
        help="wall: time.perf_counter; cpu: time.process_time, the process's own "
        "CPU seconds, immune to other jobs on shared cores (default: cpu on "
        "the CPU with one thread, else wall)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the subsample sizes")
    parser.add_argument(
        "--calibration-lengths",
        type=int,
        default=None,
        help="lengths per distribution in the calibration design (default 7, quick 5)",
    )
    parser.add_argument(
        "--batch-repeats",
        type=positive_int_arg,
        default=3,
        help="times each batch of each epoch is timed, each at its own place in the session's "
        "random order; a batch's time is the median (default 3; 1: one timing a batch)",
    )
    args = parser.parse_args(argv)
    if "NUMBA_THREADING_LAYER" not in os.environ:  # see Clock in the docstring
        numba.config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.device == "cpu" else f"_{args.device}"
    rng = np.random.default_rng(args.seed)
    if args.clock is None:
        args.clock = "cpu" if args.device == "cpu" and args.threads == 1 else "wall"
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    # (name, file, batch rule, samples in the CPU run, on the GPU, quick fraction)
    samples: tuple[int, ...] = {"cpu": (2000, 1000), "cuda": (8792, 20000)}[args.device]
    if args.quick:
        samples = tuple(s // 4 for s in samples)
    samples = tuple(max(20, int(s * args.scale)) for s in samples)
    distributions = [
        ("gsm8k", "gsm8k.npy", BatchRule(batch_size=16), samples[0]),
        ("alpaca_eval", "alpaca_eval_outputs.npy", BatchRule(max_tokens=8192), samples[1]),
    ]
    data = {}
    for name, file, rule, n in distributions:
        full = np.minimum(np.load(args.data_dir / file).astype(np.int64), MAX_LEN)
        sub = rng.choice(full, size=min(n, full.size), replace=False)
        data[name] = (sub, rule)
        print(
            f"{name}: {sub.size} of {full.size} samples, lengths {sub.min()}..{sub.max()} "
            f"(clipped at {MAX_LEN}), {rule.text}",
            flush=True,
        )

    trainer = Trainer(args.device, args.width, args.layers, args.seed)
    print(
        f"device {args.device}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"width {args.width}, layers {args.layers}, clock {args.clock}",
        flush=True,
    )

    # 1. a first calibration over the shapes both distributions produce: the model whose
    #    edges the bucketed runs use (the model of the predictions is fitted in step 3)
    n_lengths = args.calibration_lengths or (5 if args.quick else 7)
    shapes = sorted(
        {
            s
            for sub, rule in data.values()
            for s in calibration_shapes(
                LengthHistogram.from_lengths(sub), rule, n_lengths=n_lengths, packed=args.packed
            )
        },
        key=lambda s: (len(s), s[1], s[0]),
    )
    start = time.perf_counter()
    first = measure_step_times(trainer.step, shapes, repeats=2, warmup=1, clock=clock)
    first_model, _ = fit_forms(first)
    print(f"first calibration: {len(shapes)} shapes in {time.perf_counter() - start:.0f} s", flush=True)

    # 2. one epoch of each strategy (and a second run of REPEATED's identical batches)
    run_strategies = STRATEGIES if args.packed else PADDED
    epochs, all_edges = {}, {}
    for name, (sub, rule) in data.items():
        hist = LengthHistogram.from_lengths(sub)
        all_edges[name] = optimize_edges(hist, N_BUCKETS, rule, step_time=first_model).edges
        for strategy in run_strategies:
            # each strategy reads the rule as the simulator does (token_budget: the budget,
            # or batch_size samples of the longest length)
            edges = all_edges[name] if strategy == "bucketed" else None
            epochs[name, strategy] = build_epoch(sub, strategy, rule, rng=rng, edges=edges).batches()

    # 3. the session: every calibration step and every batch of every run, in one seeded
    #    random order, each timed alone, so the machine's drift falls on all alike
    repeats = 3 if args.quick else 4
    shape_steps = [shape for _ in range(repeats) for shape in shapes]  # then the batches:
    batch_keys = [
        (name, strategy, run, b)
        for (name, strategy), batches in epochs.items()
        for run in range(2 if strategy in REPEATED else 1)
        for b in range(len(batches))
    ]
    n_rep = args.batch_repeats
    batch_steps = [key for key in batch_keys for _ in range(n_rep)]  # a batch's repeats adjacent
    n_shape = len(shape_steps)
    order = rng.permutation(n_shape + len(batch_steps))
    budgets = {name: rule.token_budget(int(sub.max())) for name, (sub, rule) in data.items()}

    def run_batch(name: str, strategy: str, batch: np.ndarray) -> None:
        if strategy in PACKED:
            trainer.run_packed(batch, budgets[name])
        else:
            trainer.run(batch)

    for key, batches in epochs.items():  # warm the allocator for each strategy's first shape
        run_batch(key[0], key[1], data[key[0]][0][batches[0]])
    seconds = np.zeros(order.size)
    start, process0, thread0 = time.perf_counter(), time.process_time(), time.thread_time()
    for t in order:
        if t < n_shape:
            begin = clock()
            trainer.step(*shape_steps[t])
        else:
            name, strategy, _, b = batch_steps[t - n_shape]
            batch = data[name][0][epochs[name, strategy][b]]
            begin = clock()
            run_batch(name, strategy, batch)
        seconds[t] = clock() - begin
    own = time.thread_time() - thread0
    others = time.process_time() - process0 - own  # CPU of this process's other threads
    print(
        f"session: {order.size} steps in random order, {time.perf_counter() - start:.0f} s; "
        f"CPU of the process's other threads {others:.1f} s ({others / own:.1%} of the stepping "
        "thread's)",
        flush=True,
    )
    times = pd.DataFrame(
        [(*shape, 0) if len(shape) == 2 else shape for shape in shape_steps],
        columns=["batch_size", "length", "segment_length"],
    ).astype(np.int64)
    times.insert(2, "seconds", seconds[:n_shape])
    if not times["segment_length"].any():
        times = times.drop(columns="segment_length")
    times.to_csv(args.out / f"step_times_{args.device}.csv", index=False, float_format="%.6g")
    model, forms = fit_forms(times)
    noise = float(model.residuals()["spread"].median())
    print(forms.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"median spread of repeats (noise): {noise:.4f}")
    print(model.to_frame().to_string(float_format=lambda v: f"{v:.4g}"), flush=True)
    # drift: the calibration steps of the session's second half against its first half
    position = np.empty(order.size, np.int64)
    position[order] = np.arange(order.size)
    late = position[:n_shape] >= order.size // 2
    segment = times["segment_length"] if "segment_length" in times.columns else 0
    ratio = times["seconds"].to_numpy() / model.predict(times["batch_size"], times["length"], segment)
    drift = float(np.median(ratio[late]) / np.median(ratio[~late]))
    print(f"drift: calibration steps in the session's second half take {drift:.3f} x its first half")

    # 4. a batch's time: the median of its repeats; a run's: the sum of its batches' medians
    timings = seconds[n_shape:].reshape(len(batch_keys), n_rep)
    features = {
        (name, strategy): epoch_features(data[name][0], batches, strategy in PACKED, budgets[name], model)
        for (name, strategy), batches in epochs.items()
    }
    per_step = batch_table(batch_keys, timings, position[n_shape:], features)
    per_step.to_csv(args.out / f"step_time_batches{suffix}.csv", index=False, float_format="%.6g")
    per_batch = pd.DataFrame(batch_keys, columns=["distribution", "strategy", "run", "batch"])
    per_batch["seconds"] = np.median(timings, axis=1)
    per_batch["spread"] = relative_spread(timings)
    run_seconds = per_batch.groupby(["distribution", "strategy", "run"])["seconds"].sum().to_dict()
    batch_spread = per_batch.groupby(["distribution", "strategy"])["spread"].median().to_dict()
    family = np.where(per_batch["strategy"].isin(PACKED), "packed", "padded")
    spreads = per_batch.groupby(family)["spread"].median()
    print(
        f"median spread of batch repeats ({n_rep} a batch; calibration {noise:.4f}): "
        + ", ".join(f"{fam} {value:.4f}" for fam, value in spreads.items()),
        flush=True,
    )

    # 5. measured tokens/s against the predictions
    rows = []
    for name, (sub, rule) in data.items():
        hist = LengthHistogram.from_lengths(sub)
        edges = all_edges[name]
        measured, epoch_pred, batch_info = {}, {}, {}
        for strategy in run_strategies:
            batches = epochs[name, strategy]
            feats = features[name, strategy]
            measured[strategy] = [
                float(run_seconds[name, strategy, r]) for r in range(2 if strategy in REPEATED else 1)
            ]
            epoch_pred[strategy] = float(feats["predicted_seconds"].sum())
            if strategy in PACKED:  # rows of the budget, attention within each sample
                batch_info[strategy] = (len(batches), len(batches) * budgets[name])
            else:
                padded_tokens = (
                    feats["samples"].to_numpy(np.int64) * feats["longest"].to_numpy(np.int64)
                ).sum()
                batch_info[strategy] = (len(batches), int(padded_tokens))
            print(
                f"{name} {strategy}: {len(batches)} batches, {measured[strategy][0]:.1f} s, "
                f"{hist.total_tokens / measured[strategy][0]:,.0f} tok/s",
                flush=True,
            )
        sorted_tps = hist.total_tokens / measured["sorted"][0]
        table = predict_strategy_throughput(
            hist,
            model,
            rule,
            edges=edges,
            rng=rng,
            epochs=5,
            strategies=run_strategies,
            reference_tokens_per_s=sorted_tps,
        )
        for strategy in run_strategies:
            runs = measured[strategy]
            tps = hist.total_tokens / runs[0]
            pred = float(table["tokens_per_s"].astype(float)[strategy])
            padded = float(table["padded_tokens_per_s"].astype(float)[strategy])
            this_epoch = hist.total_tokens / epoch_pred[strategy]
            repeat = hist.total_tokens / runs[1] if len(runs) > 1 else float("nan")
            rows.append(
                {
                    "distribution": name,
                    "device": args.device,
                    "threads": args.threads,
                    "clock": args.clock,
                    "strategy": strategy,
                    "batch_rule": table.loc[strategy, "batch_rule"],
                    "samples": sub.size,
                    "batches": batch_info[strategy][0],
                    "useful_tokens": hist.total_tokens,
                    "padded_tokens": batch_info[strategy][1],
                    "measured_seconds": runs[0],
                    "measured_tokens_per_s": tps,
                    "repeat_tokens_per_s": repeat,
                    "noise": abs(repeat - tps) / tps if len(runs) > 1 else float("nan"),
                    "predicted_tokens_per_s": pred,
                    "step_time_error": pred / tps - 1,
                    "predicted_this_epoch_tokens_per_s": this_epoch,
                    "this_epoch_error": this_epoch / tps - 1,
                    "padded_tokens_per_s": padded,
                    "padded_error": padded / tps - 1,
                    "prediction_exact": bool(table.loc[strategy, "exact"]),
                    "edges": " ".join(map(str, edges)) if strategy == "bucketed" else "",
                    "batch_repeats": n_rep,
                    "batch_spread": float(batch_spread[name, strategy]),
                }
            )
    frame = add_anchored(pd.DataFrame(rows))
    frame["drift"] = drift
    frame.to_csv(args.out / f"step_time_validation{suffix}.csv", index=False, float_format="%.6g")
    show = frame[
        [
            "distribution",
            "strategy",
            "measured_tokens_per_s",
            "predicted_tokens_per_s",
            "step_time_error",
            "this_epoch_error",
            "anchored_error",
            "padded_tokens_per_s",
            "padded_error",
            "noise",
            "batch_spread",
        ]
    ]
    print(show.to_string(index=False, float_format=lambda v: f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"))


if __name__ == "__main__":
    main()
