"""Gradient noise on a real model and real text: the probe's prediction against measured
batch-gradient variance, per strategy and window (issue 33, item 5).

Text: every top-level function and class of the Python standard library's own source
(``sysconfig.get_paths()["stdlib"]``, test folders skipped); a byte-level BPE of 1,024 tokens
trained here on part of it (``tokenizers``); snippets of 8..512 tokens.  Model: a 2-layer
GPT-2 of width 64 built from a config (``transformers``, no download), trained briefly on
shuffled batches of 8 (sample-mean loss: each sample's token-mean cross-entropy, averaged).

At that checkpoint:

1. the probe (:func:`analysis.timing.noise.measure_gradient_noise`, per-sample gradients
   count-sketched to 4,096 coordinates) fits a ``GradientNoise`` model on a *probe* set;
2. the per-sample gradients of a disjoint *measurement* set are computed exactly (same
   sketch), and for every strategy the measured per-step error ``|Σ_t (g_t - G)|**2 / W``
   of its batches (``G`` the measurement set's mean gradient) is averaged over many epochs;
3. the prediction for the measurement set's lengths comes from the probe set's model:
   exact for random, sorted and bucketed at ``W = 1``
   (:func:`analysis.timing.noise.plan_noise`), simulated for every strategy and window
   (:func:`analysis.answers.gradient_noise.strategy_noise`).

Then (unless ``--no-train``) steps to a fixed held-out loss for shuffle, bucketed K = 6 and
length_grouped, several seeds each, from the same initialisation at the same learning rate,
against the ratio the model predicts.

Writes ``data/gradient_noise_validation.csv`` (and ``data/gradient_noise_training.csv``) and
prints both tables.  One CPU thread: about 12 minutes for the variance table and 20 more for
the training runs, on 2 cores shared with other jobs:

    python benchmarks/bench_gradient_noise.py            # from the repository root

``--device`` (default ``cuda`` where torch sees one) puts the model, its batches and the count
sketch on that device; the sketched gradients come back to the CPU as numpy, and everything
handed to ``analysis`` stays there.  ``--n-layer``, ``--n-embd``, ``--n-head`` and ``--vocab``
size the model and the BPE (defaults: the committed CPU run's 2, 64, 2 and 1,024; with them on
the CPU the files come out byte for byte as before).  ``--suffix`` is appended to every file
name written.  ``benchmarks/gpu_gradient_noise.sh`` runs a larger model on a GPU.
"""

from __future__ import annotations

import argparse
import math
import sysconfig
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel

from analysis import LengthHistogram, optimize_edges, save_histogram
from analysis.answers.gradient_noise import strategy_noise
from analysis.loaders import save_gradient_noise
from analysis.simulation.strategies import epoch_builder
from analysis.timing.noise import GradientNoise, measure_gradient_noise, plan_noise

ROOT = Path(__file__).resolve().parents[1]
#: The files written, under --out-dir (default data/).
OUT, OUT_TRAINING = "gradient_noise_validation.csv", "gradient_noise_training.csv"
OUT_MODEL, OUT_LENGTHS = "gradient_noise_model.npz", "gradient_noise_lengths.csv"
BATCH = 8
WINDOWS = (1, 4, 16)
SKETCH = 4096
MIN_LEN, MAX_LEN = 8, 512


# ------------------------------------------------------------------------------- the text
def _blocks(source: str) -> list[str]:
    """The top-level ``def``/``class`` blocks of a module (decorators included): a block runs
    until the next line that starts in column 0 and is not blank or a comment."""
    out, current = [], []
    for line in source.splitlines():
        starts = line[:1] not in ("", " ", "\t", "#")
        if starts and current and not current[-1].startswith("@"):
            out.append("\n".join(current).rstrip())
            current = []
        if starts and not line.startswith(("def ", "async def ", "class ", "@")):
            current = []
            continue
        if current or starts:
            current.append(line)
    if current:
        out.append("\n".join(current).rstrip())
    return [b for b in out if b.startswith(("def ", "async def ", "class ", "@"))]


def stdlib_snippets(rng: np.random.Generator) -> list[str]:
    """Every top-level function and class of the standard library's source (its tests
    included), shuffled."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.relative_to(root).parts:
            continue
        try:
            out += _blocks(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            continue
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def train_bpe(texts: list[str], vocab: int = 1024) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    return tok


# ------------------------------------------------------------------------------ the model
def build_model(seed: int, args: argparse.Namespace) -> GPT2LMHeadModel:
    """GPT-2 of ``args``' size, initialised on the CPU from ``seed``, then moved to ``args.device``."""
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=args.vocab,
        n_positions=MAX_LEN,
        n_embd=args.n_embd,
        n_layer=args.n_layer,
        n_head=args.n_head,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(config).to(args.device)


def batch_loss(model: GPT2LMHeadModel, seqs: list[np.ndarray]) -> torch.Tensor:
    """The sample-mean loss: each sample's token-mean cross-entropy, averaged over samples."""
    longest = max(s.size for s in seqs)
    ids = torch.zeros((len(seqs), longest), dtype=torch.long)
    mask = torch.zeros((len(seqs), longest), dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, : s.size] = torch.from_numpy(s)
        mask[r, : s.size] = 1
    ids, mask = ids.to(model.device), mask.to(model.device)
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
    target, keep = ids[:, 1:], mask[:, 1:].float()
    per_token = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, reduction="none")
    return ((per_token * keep).sum(1) / keep.sum(1)).mean()


def train(
    model: GPT2LMHeadModel,
    seqs: list[np.ndarray],
    batches: list[np.ndarray],
    lr: float,
    held: list[np.ndarray],
    check_at: int = 0,
) -> float:
    """AdamW over ``batches``; the held-out loss after ``check_at`` steps (NaN when 0)."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    checked = math.nan
    for step, b in enumerate(batches, 1):
        opt.zero_grad()
        batch_loss(model, [seqs[i] for i in b]).backward()
        opt.step()
        if step == check_at:
            checked = held_out_loss(model, held)
    return checked


@torch.no_grad()
def held_out_loss(model: GPT2LMHeadModel, seqs: list[np.ndarray]) -> float:
    model.eval()
    losses = [float(batch_loss(model, seqs[i : i + 32])) for i in range(0, len(seqs), 32)]
    model.train()
    return float(np.mean(losses))


class Sketch:
    """Count sketch of the flattened gradient to ``SKETCH`` coordinates: hashes drawn on the CPU
    (the same on every device), summed on the model's device, returned as numpy."""

    def __init__(self, model: GPT2LMHeadModel, seed: int = 0) -> None:
        n = sum(p.numel() for p in model.parameters())
        gen = torch.Generator().manual_seed(seed)
        self.slot = torch.randint(SKETCH, (n,), generator=gen).to(model.device)
        self.sign = (torch.randint(0, 2, (n,), generator=gen).float() * 2 - 1).to(model.device)

    def gradient(self, model: GPT2LMHeadModel, seqs: list[np.ndarray]) -> np.ndarray:
        model.zero_grad()
        batch_loss(model, seqs).backward()
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        sketch = torch.zeros(SKETCH, device=flat.device).index_add_(0, self.slot, self.sign * flat)
        return sketch.cpu().numpy().astype(float)


# ---------------------------------------------------------------------------- measuring
def plans(hist: LengthHistogram) -> dict[str, tuple[str, list[int] | None]]:
    out: dict[str, tuple[str, list[int] | None]] = {"shuffle": ("random", None), "sorted": ("sorted", None)}
    for k in (2, 6, 16):
        out[f"bucketed K={k}"] = ("bucketed", list(optimize_edges(hist, k, batch_size=BATCH).edges))
    for name in ("length_grouped", "token_budget", "packing_bfd"):
        out[name] = (name, None)
    return out


def measured_noise(
    grads: np.ndarray,
    lengths: np.ndarray,
    strategy: str,
    edges: list[int] | None,
    epochs: int,
    rng: np.random.Generator,
) -> dict[int, tuple[float, float]]:
    """Per window: the mean over epochs of the per-step window error, and its SE."""
    full = grads.mean(0)
    builder = epoch_builder(lengths, strategy, batch_size=BATCH, edges=edges)
    per_epoch: dict[int, list[float]] = {w: [] for w in WINDOWS}
    for _ in range(epochs):
        ep = builder.epoch(rng)
        sums = np.add.reduceat(grads[ep.indices], ep.offsets[:-1], axis=0)
        errs = sums / ep.sizes[:, None] - full
        for w in WINDOWS:
            n = errs.shape[0] // w * w
            win = errs[:n].reshape(-1, w, errs.shape[1]).sum(axis=1)
            per_epoch[w].append(float(np.mean(np.sum(win * win, axis=1))) / w)
    return {
        w: (float(np.mean(v)), float(np.std(v, ddof=1) / math.sqrt(len(v)))) for w, v in per_epoch.items()
    }


def validation(
    args: argparse.Namespace, seqs: list[np.ndarray], model: GPT2LMHeadModel
) -> tuple[pd.DataFrame, GradientNoise]:
    rng = np.random.default_rng(args.seed + 1)
    lengths = np.array([s.size for s in seqs])
    probe_ix = np.arange(args.train, args.train + args.probe)
    meas_ix = np.arange(args.train + args.probe, args.train + args.probe + args.measure)
    sketch = Sketch(model)
    start = time.perf_counter()
    noise = measure_gradient_noise(
        lambda idx: sketch.gradient(model, [seqs[probe_ix[i]] for i in idx]),
        lengths[probe_ix],
        n_bins=args.bins,
        groups_per_bin=args.groups,
        rng=rng,
    )
    probe_s = time.perf_counter() - start
    grads = np.array([sketch.gradient(model, [seqs[i]]) for i in meas_ix])
    meas_len = lengths[meas_ix]
    hist = LengthHistogram.from_lengths(meas_len)
    figs = noise.figures(hist)
    print(
        f"probe: {noise.backward_passes} backward passes of one sample in {probe_s:.0f} s, "
        f"{noise.n_bins} bins; "
        f"on the measurement set tr Σ = {figs['trace'].value:.4g} ± {figs['trace'].se:.2g}, "
        f"|G|² = {figs['gradient_norm2'].value:.4g} ± {figs['gradient_norm2'].se:.2g}, "
        f"B_noise = {figs['noise_scale'].value:.1f} ± {figs['noise_scale'].se:.1f}"
    )
    table = plans(hist)
    options = {"rng": rng, "batch_size": BATCH, "windows": WINDOWS, "epochs": args.sim_epochs}
    base = strategy_noise(
        noise, meas_len, ["sorted", "length_grouped", "token_budget", "packing_bfd"], **options
    )
    simulated = {
        label: strategy_noise(noise, meas_len, ["bucketed"], edges=edges, **options)
        if s == "bucketed"
        else base
        for label, (s, edges) in table.items()
    }
    measured = {
        label: measured_noise(grads, meas_len, s, e, args.epochs, rng) for label, (s, e) in table.items()
    }
    rows = []
    for label, (strategy, edges) in table.items():
        frame = simulated[label]
        exact = (
            plan_noise(noise, hist, strategy, edges=edges, batch_size=BATCH)
            if strategy in ("random", "sorted", "bucketed")
            else None
        )
        for w in WINDOWS:
            row = frame[(frame["strategy"] == strategy) & (frame["window"] == w)].iloc[0]
            m, m_se = measured[label][w]
            ref, ref_se = measured["shuffle"][w]
            pred = exact.variance.value if (exact is not None and w == 1) else float(row["variance"])
            pred_se = (
                exact.variance.se
                if (exact is not None and w == 1)
                else math.hypot(row["se"], row["model_se"])
            )
            pred_ratio = exact.variance_ratio.value if (exact is not None and w == 1) else float(row["ratio"])
            pred_ratio_se = (
                exact.variance_ratio.se if (exact is not None and w == 1) else float(row["ratio_se"])
            )
            ratio = m / ref
            ratio_se = ratio * math.hypot(m_se / m, ref_se / ref) if label != "shuffle" else 0.0
            rows.append(
                {
                    "plan": label,
                    "window": w,
                    "priced": "exact" if (exact is not None and w == 1) else "simulated",
                    "measured": m,
                    "measured_se": m_se,
                    "predicted": pred,
                    "predicted_se": pred_se,
                    "error": pred / m - 1,
                    "z": (pred - m) / math.hypot(m_se, pred_se),
                    "measured_ratio": ratio,
                    "measured_ratio_se": ratio_se,
                    "predicted_ratio": pred_ratio,
                    "predicted_ratio_se": pred_ratio_se,
                    "between_share": exact.between_share.value if exact is not None else math.nan,
                    "effective_batch": exact.effective_batch.value if exact is not None else math.nan,
                    "steps_ratio": exact.steps_ratio.value if exact is not None else math.nan,
                }
            )
    save_gradient_noise(noise, args.out_dir / _named(OUT_MODEL, args.suffix))
    save_histogram(hist, args.out_dir / _named(OUT_LENGTHS, args.suffix))
    return pd.DataFrame(rows), noise


def steps_to_loss(args: argparse.Namespace, seqs: list[np.ndarray], noise: GradientNoise) -> pd.DataFrame:
    """Steps to a fixed held-out loss per strategy and seed (same initialisation and lr)."""
    train_ix = np.arange(args.train)
    held = seqs[-args.held_out :]
    lengths = np.array([seqs[i].size for i in train_ix])
    hist = LengthHistogram.from_lengths(lengths)
    runs = {
        "shuffle": ("random", None),
        "bucketed K=6": ("bucketed", list(optimize_edges(hist, 6, batch_size=BATCH).edges)),
        "length_grouped": ("length_grouped", None),
    }
    rows = []
    for seed in range(args.seeds):
        for label, (strategy, edges) in runs.items():
            model = build_model(100 + seed, args)  # per seed, one initialisation for every plan
            builder = epoch_builder(lengths, strategy, batch_size=BATCH, edges=edges)
            rng = np.random.default_rng(1000 + seed)
            opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
            step, reached, loss, last = 0, None, math.nan, (0, math.inf)
            while step < args.max_steps and reached is None:
                for b in builder.epoch(rng).batches():
                    opt.zero_grad()
                    batch_loss(model, [seqs[train_ix[i]] for i in b]).backward()
                    opt.step()
                    step += 1
                    if step % args.eval_every == 0:
                        loss = held_out_loss(model, held)
                        if loss <= args.target:  # the crossing, interpolated between evaluations
                            reached = last[0] + (step - last[0]) * (last[1] - args.target) / (last[1] - loss)
                            if not math.isfinite(reached):
                                reached = float(step)
                            break
                        last = (step, loss)
                    if step >= args.max_steps:
                        break
            rows.append(
                {"plan": label, "seed": seed, "steps": reached if reached else math.nan, "final_loss": loss}
            )
            print(f"  {label:15s} seed {seed}: {reached} steps (held-out {loss:.3f})", flush=True)  # noqa: T201
    out = pd.DataFrame(rows)
    # predicted steps to the same loss over a shuffle's: (1 + B_noise r / B) / (1 + B_noise / B), r the
    # variance ratio to a shuffle's on the training set's lengths, per step (W = 1) and over 16 steps
    scale = noise.figures(hist)["noise_scale"].value
    sim = strategy_noise(
        noise,
        lengths,
        ["bucketed", "length_grouped"],
        rng=np.random.default_rng(7),
        batch_size=BATCH,
        edges=runs["bucketed K=6"][1],
        windows=(1, 16),
        epochs=args.sim_epochs,
    )
    for w in (1, 16):
        ratio = sim[sim["window"] == w].set_index("strategy")["ratio"]
        by_plan = {
            "shuffle": 1.0,
            "bucketed K=6": ratio["bucketed"],
            "length_grouped": ratio["length_grouped"],
        }
        predicted = {p: (1 + scale * r / BATCH) / (1 + scale / BATCH) for p, r in by_plan.items()}
        out[f"predicted_ratio_w{w}"] = out["plan"].map(predicted)
    return out


def _named(name: str, suffix: str) -> str:
    """``name`` with ``suffix`` before its extension."""
    stem, dot, ext = name.partition(".")
    return f"{stem}{suffix}{dot}{ext}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "data", help="where the files go")
    parser.add_argument("--suffix", default="", help="appended to every file name written, e.g. _cuda")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-embd", type=int, default=64)
    parser.add_argument("--n-head", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=1024, help="the BPE's and the model's vocabulary")
    parser.add_argument("--train", type=int, default=4000, help="snippets to train on")
    parser.add_argument("--probe", type=int, default=1500, help="snippets the probe fits on")
    parser.add_argument("--measure", type=int, default=1600, help="snippets measured")
    parser.add_argument("--held-out", type=int, default=128)
    parser.add_argument("--steps", type=int, default=150, help="training steps before the probe")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--bins", type=int, default=32)
    parser.add_argument("--groups", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=60, help="measured epochs per strategy")
    parser.add_argument("--sim-epochs", type=int, default=20)
    parser.add_argument("--no-train", action="store_true", help="skip the steps-to-loss runs")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--target", type=float, default=5.3, help="held-out loss to reach")
    parser.add_argument(
        "--target-at",
        type=int,
        default=0,
        help="instead of --target: the held-out loss the first training run had after this many steps",
    )
    parser.add_argument("--max-steps", type=int, default=600)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument(
        "--fit",
        action="store_true",
        help="scale --train, --probe, --measure and --held-out down together when the stdlib holds "
        "fewer snippets (one without its test folders holds about 4,600)",
    )
    return parser


def _fit(args: argparse.Namespace, available: int) -> int:
    """The snippets needed; with ``--fit``, the four sets scaled down together to ``available``."""
    sizes = (args.train, args.probe, args.measure, args.held_out)
    if args.fit and sum(sizes) > available:
        scale = available / sum(sizes)
        args.train, args.probe, args.measure, args.held_out = (int(n * scale) for n in sizes)
        print(
            f"--fit: {available} snippets, sets scaled by {scale:.3f}: {args.train} to train on, "
            f"{args.probe} probed, {args.measure} measured, {args.held_out} held out"
        )
    return args.train + args.probe + args.measure + args.held_out


def main() -> None:
    args = _parser().parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    texts = stdlib_snippets(rng)
    tok = train_bpe(texts[:3000], args.vocab)
    seqs = [np.array(e.ids, dtype=np.int64) for e in tok.encode_batch(texts)]
    seqs = [s for s in seqs if MIN_LEN <= s.size <= MAX_LEN]
    need = _fit(args, len(seqs))
    if len(seqs) < need:
        raise SystemExit(f"only {len(seqs)} snippets of {MIN_LEN}..{MAX_LEN} tokens, {need} needed")
    lengths = np.array([s.size for s in seqs[:need]])
    print(
        f"{len(texts)} snippets; {need} used, {MIN_LEN}..{MAX_LEN} tokens, median {int(np.median(lengths))}"
    )
    model = build_model(args.seed, args)
    print(
        f"device {args.device}, torch {torch.__version__}: GPT-2 of {args.n_layer} layers, width "
        f"{args.n_embd}, {args.n_head} heads, vocabulary {args.vocab}, "
        f"{sum(p.numel() for p in model.parameters()):,} parameters"
    )
    # shuffled epochs over the training set, as many as --steps takes (the first is the committed run's)
    shuffles = np.random.default_rng(args.seed)
    epochs = max(1, -(-args.steps * BATCH // args.train))
    order = np.concatenate([shuffles.permutation(args.train) for _ in range(epochs)])[: args.steps * BATCH]
    batches = [order[i : i + BATCH] for i in range(0, order.size, BATCH)]
    at = train(model, seqs, batches, args.lr, seqs[-args.held_out :], args.target_at)
    if args.target_at:
        args.target = at
        print(f"target: the held-out loss after {args.target_at} steps, {at:.3f}")
    print(
        f"after {args.steps} steps: held-out loss {held_out_loss(model, seqs[-args.held_out :]):.3f} "
        f"[{time.perf_counter() - start:.0f} s]"
    )
    frame, noise = validation(args, seqs, model)
    frame.to_csv(args.out_dir / _named(OUT, args.suffix), index=False, float_format="%.6g")
    print(f"variance table written [{time.perf_counter() - start:.0f} s]")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(
            frame[
                [
                    "plan",
                    "window",
                    "priced",
                    "measured",
                    "measured_se",
                    "predicted",
                    "predicted_se",
                    "error",
                    "z",
                    "measured_ratio",
                    "predicted_ratio",
                    "between_share",
                    "effective_batch",
                ]
            ]
            .round(4)
            .to_string(index=False)
        )
    if not args.no_train:
        runs = steps_to_loss(args, seqs, noise)
        runs.to_csv(args.out_dir / _named(OUT_TRAINING, args.suffix), index=False, float_format="%.6g")
        summary = runs.groupby("plan").agg(
            steps_mean=("steps", "mean"),
            steps_sd=("steps", "std"),
            predicted_ratio_w1=("predicted_ratio_w1", "first"),
            predicted_ratio_w16=("predicted_ratio_w16", "first"),
        )
        summary["measured_ratio"] = summary["steps_mean"] / summary.loc["shuffle", "steps_mean"]
        print(summary.round(3).to_string())
        print(f"training runs done [{time.perf_counter() - start:.0f} s]")


if __name__ == "__main__":
    main()
