"""The standard resume, against the real libraries: torchdata's ``StatefulDataLoader`` (0 and 2
workers), Accelerate's prepared dataloader (``use_stateful_dataloader``) and a ``transformers``
``Trainer`` running the recipe of :func:`analysis.exports.to_hf`.  Every check checkpoints
mid-run, restores into fresh objects, and compares the batches (sample indices) seen after the
resume with those of an uninterrupted run."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from analysis import BucketedBatchSampler, LengthHistogram, exports, optimize_edges
from tests.index_dataset import IndexDataset

# torchdata 0.11 calls torch.set_vital, which torch 2.13 deprecates, when a loader is built
pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")

EPOCHS = 3


def _lengths(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(4.0, 0.8, size=n), 1, 300).astype(np.int64)


LENGTHS = _lengths(0, 300)
EDGES = [0, 50, 120, 300]


def _sampler(seed: int = 2) -> BucketedBatchSampler:
    return BucketedBatchSampler(LENGTHS, EDGES, batch_size=8, seed=seed)


def _reference(epochs: int = EPOCHS) -> list[tuple[int, list[int]]]:
    """``(epoch, batch)`` of an uninterrupted run, straight from a sampler."""
    s = _sampler()
    out = []
    for e in range(epochs):
        s.set_epoch(e)
        out += [(e, b) for b in s]
    return out


STEPS = len(_sampler())  # batches per epoch


def _loop(loader, sampler, path: Path, *, start: int = 0, save_at: int | None = None, save_after: int = -1):
    """A training loop's data side: ``(epoch, batch, len(sampler))`` per step.

    Saves ``{"loader": loader.state_dict(), "epoch": ...}`` with ``torch.save`` (as a real
    checkpoint) and stops, after global step ``save_at`` (inside the epoch's loop) or after
    epoch ``save_after`` has run out (then the loop would go on with the next epoch).
    """
    seen = []
    for epoch in range(start, EPOCHS):
        sampler.set_epoch(epoch)
        for batch in loader:
            seen.append((epoch, batch.tolist(), len(sampler)))
            if len(seen) == save_at:
                torch.save({"loader": loader.state_dict(), "epoch": epoch}, path)
                return seen
        if epoch == save_after:
            torch.save({"loader": loader.state_dict(), "epoch": epoch + 1}, path)
            return seen
    return seen


CUTS = {
    "mid epoch 0": {"save_at": 5},
    "mid epoch 1": {"save_at": STEPS + 11},
    "last batch of epoch 0": {"save_at": STEPS},
    "end of epoch 0": {"save_after": 0},
    "mid epoch 2": {"save_at": 2 * STEPS + 1},
}


@pytest.mark.parametrize("cut", list(CUTS))
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("resume_seed", [2, 5])  # 5: restored into a sampler built with another seed
def test_stateful_dataloader_resumes_with_the_same_batches(tmp_path, num_workers, cut, resume_seed):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader_for(sampler):
        kw = {"num_workers": num_workers, "prefetch_factor": 2} if num_workers else {}
        return StatefulDataLoader(IndexDataset(LENGTHS.size), batch_sampler=sampler, **kw)

    expected = _reference()
    sampler = _sampler()
    first = _loop(loader_for(sampler), sampler, tmp_path / "ckpt.pt", **CUTS[cut])
    assert 0 < len(first) < len(expected)
    in_epoch = len(first) - STEPS * first[-1][0]  # batches consumed in the last epoch run
    if num_workers and in_epoch < STEPS:  # the workers had been handed more batches
        assert sampler.yielded > in_epoch
    ckpt = torch.load(tmp_path / "ckpt.pt")
    assert ckpt["loader"]  # the loader saved the sampler's own state in it

    resumed = _sampler(resume_seed)  # fresh sampler, fresh loader: the state's seed (2) wins
    loader = loader_for(resumed)
    loader.load_state_dict(ckpt["loader"])
    rest = _loop(loader, resumed, tmp_path / "unused.pt", start=ckpt["epoch"])
    assert [(e, b) for e, b, _ in first + rest] == expected
    for epoch in range(EPOCHS):  # every sample exactly once per epoch
        seen = [i for e, b, _ in first + rest if e == epoch for i in b]
        assert sorted(seen) == list(range(LENGTHS.size))
    # len(sampler) in the resumed pass counts what is left of its epoch; later epochs are full
    done = sum(1 for e, _, _ in first if e == ckpt["epoch"])
    assert [n for _, _, n in rest] == [STEPS - done] * (STEPS - done) + [STEPS] * (len(rest) - STEPS + done)
    resumed.set_epoch(EPOCHS)
    assert len(resumed) == STEPS


@pytest.mark.parametrize("last_of_epoch_0", [False, True])
@pytest.mark.parametrize("sync", [True, False])
def test_stateful_dataloader_ddp_ranks_resume_with_the_states_seed(tmp_path, sync, last_of_epoch_0):
    """Two ranks (one sampler and loader each, as DDP runs them), checkpointed mid epoch 1 by
    rank 0's loader, restored into samplers built with another seed: every rank's stream is
    that of an uninterrupted run with the saved seed, and each epoch covers the samples as the
    uninterrupted epoch does (every one, the repeats that complete the last steps apart)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    world = 2

    def sampler(rank, seed):
        return BucketedBatchSampler(
            LENGTHS, EDGES, batch_size=8, seed=seed, rank=rank, world_size=world, sync_buckets=sync
        )

    def run(samplers, loaders, start, stop_at=None):
        seen = [[] for _ in range(world)]
        for epoch in range(start, 2):
            for s in samplers:
                s.set_epoch(epoch)
            for step, batches in enumerate(zip(*loaders)):
                for r, b in enumerate(batches):
                    seen[r].append((epoch, b.tolist()))
                if (epoch, step + 1) == stop_at:
                    return seen, [loader.state_dict() for loader in loaders]
        return seen, None

    reference = [sampler(r, 3) for r in range(world)]
    expected, _ = run(
        reference, [StatefulDataLoader(IndexDataset(LENGTHS.size), batch_sampler=s) for s in reference], 0
    )
    samplers = [sampler(r, 3) for r in range(world)]
    loaders = [StatefulDataLoader(IndexDataset(LENGTHS.size), batch_sampler=s) for s in samplers]
    stop_at = (0, len(samplers[0])) if last_of_epoch_0 else (1, 4)
    first, states = run(samplers, loaders, 0, stop_at=stop_at)
    assert states is not None
    torch.save({"loader": states[0]}, tmp_path / "ckpt.pt")  # rank 0 saves, every rank loads
    saved = torch.load(tmp_path / "ckpt.pt")["loader"]
    resumed = [sampler(r, 11) for r in range(world)]
    loaders = [StatefulDataLoader(IndexDataset(LENGTHS.size), batch_sampler=s) for s in resumed]
    for loader in loaders:
        loader.load_state_dict(saved)
    rest, _ = run(resumed, loaders, 1)  # the loop goes on in epoch 1 (set_epoch, then iter)
    assert [first[r] + rest[r] for r in range(world)] == expected
    for epoch in range(2):
        want = np.bincount([i for r in range(world) for e, b in expected[r] if e == epoch for i in b])
        got = np.bincount([i for r in range(world) for e, b in first[r] + rest[r] if e == epoch for i in b])
        assert got.tolist() == want.tolist() and want.min() >= 1
        assert int(want.sum()) - LENGTHS.size == reference[0].global_epoch(epoch).n_repeated


def test_state_dict_without_argument_is_what_was_yielded():
    s = _sampler()
    s.set_epoch(1)
    it = iter(s)
    for _ in range(4):
        next(it)
    assert s.state_dict() == s.state_dict(consumed=4)
    assert s.state_dict()["epoch"] == 1
    s.set_epoch(2)  # a new epoch starts from nothing yielded
    assert s.state_dict()["consumed"] == 0 and s.state_dict()["epoch"] == 2


@pytest.mark.parametrize("num_workers", [0, 2])
def test_accelerate_stateful_dataloader_resumes_from_save_state(tmp_path, num_workers):
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration

    def prepared(sampler):
        accelerator = Accelerator(
            cpu=True, dataloader_config=DataLoaderConfiguration(use_stateful_dataloader=True)
        )
        loader = torch.utils.data.DataLoader(
            IndexDataset(LENGTHS.size), batch_sampler=sampler, num_workers=num_workers
        )
        return accelerator, accelerator.prepare(loader)

    expected = [b for _, b in _reference(2)]
    sampler = _sampler()
    accelerator, loader = prepared(sampler)
    assert loader.use_stateful_dataloader and loader.batch_sampler is sampler
    seen: list[list[int]] = []
    save_at = STEPS + 6  # mid epoch 1
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for batch in loader:
            seen.append(batch.tolist())
            if len(seen) == save_at:
                accelerator.save_state(tmp_path / "ckpt")
                break
        if len(seen) == save_at:
            break
    assert sampler.yielded > 6  # Accelerate looks one batch ahead (and the workers more)

    resumed = _sampler()
    accelerator, loader = prepared(resumed)
    accelerator.load_state(tmp_path / "ckpt")
    lens = []
    for again in range(epoch, 2):
        resumed.set_epoch(again)
        for batch in loader:
            seen.append(batch.tolist())
            lens.append(len(loader))
    assert seen == expected
    assert lens == [STEPS - 6] * (STEPS - 6)


# ------------------------------------------------------------------ transformers Trainer
def _recipe(plan):
    """The ``BucketedTrainer`` of the recipe in ``exports.to_hf``'s docstring, run as written."""
    from transformers import Trainer

    doc = textwrap.dedent(exports.to_hf.__doc__.split("Recipe", 1)[1].split("::\n", 1)[1])
    code = textwrap.dedent(re.split(r"\n(?=\S)", doc.strip("\n"), maxsplit=1)[0])
    assert "class BucketedTrainer(Trainer)" in code
    namespace = {"plan": plan, "Trainer": Trainer}
    exec(compile(code, "exports.to_hf recipe", "exec"), namespace)
    return namespace["BucketedTrainer"]


def _trainer_run(out: Path, plan, rows, *, resume: str | None = None, save_steps: int, epochs: int):
    from datasets import Dataset
    from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments

    seen: list[list[int]] = []

    def collate(features):
        longest = max(len(f["input_ids"]) for f in features)
        ids = torch.zeros(len(features), longest, dtype=torch.int64)
        mask = torch.zeros_like(ids)
        for i, f in enumerate(features):
            ids[i, : len(f["input_ids"])] = torch.tensor(f["input_ids"])
            mask[i, : len(f["input_ids"])] = 1
        labels = ids.masked_fill(mask == 0, -100)
        idx = torch.tensor([f["idx"] for f in features])
        return {"input_ids": ids, "attention_mask": mask, "labels": labels, "idx": idx}

    class Recording(_recipe(plan)):
        def training_step(self, model, inputs, num_items_in_batch=None):
            seen.append(inputs.pop("idx").tolist())  # the batch the step trains on
            return super().training_step(model, inputs, num_items_in_batch)

    args = TrainingArguments(
        output_dir=str(out),
        num_train_epochs=epochs,
        save_strategy="steps",
        save_steps=save_steps,
        report_to=[],
        use_cpu=True,
        logging_strategy="no",
        dataloader_pin_memory=False,
        learning_rate=1e-3,
        seed=7,
        **exports.to_hf(plan)["training_args"],
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=2, n_head=2))
    trainer = Recording(model=model, args=args, train_dataset=Dataset.from_list(rows), data_collator=collate)
    out = trainer.train(resume_from_checkpoint=resume)
    return seen, out.global_step


@pytest.fixture
def one_thread():
    """A tiny model gains nothing from intra-op threads; on a busy machine they only contend."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_trainer_resumes_mid_epoch_with_the_same_batches(tmp_path, one_thread):
    rng = np.random.default_rng(3)
    # random token data, lengths drawn from a small histogram
    lengths = rng.choice([3, 5, 8, 12, 20, 32, 48], size=40, p=[0.2, 0.2, 0.2, 0.15, 0.1, 0.1, 0.05])
    plan = optimize_edges(LengthHistogram.from_lengths(lengths), 3, batch_size=4)
    rows = [
        {"input_ids": rng.integers(1, 64, size=int(n)).tolist(), "length": int(n), "idx": i}
        for i, n in enumerate(lengths)
    ]
    sampler = BucketedBatchSampler(lengths, plan, seed=7)
    steps = len(sampler)
    expected = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        expected += list(sampler)
    save_steps = (2 * steps) // 3  # checkpoints mid epoch 0 and mid epoch 1
    assert 0 < save_steps < steps < 2 * save_steps < 2 * steps

    full, global_step = _trainer_run(tmp_path / "run", plan, rows, save_steps=save_steps, epochs=2)
    assert global_step == 2 * steps and full == expected  # the plan's batches, epoch by epoch
    for at in (save_steps, 2 * save_steps):
        checkpoint = tmp_path / "run" / f"checkpoint-{at}"
        assert checkpoint.is_dir()
        rest, global_step = _trainer_run(
            tmp_path / f"resumed-{at}", plan, rows, resume=str(checkpoint), save_steps=10**6, epochs=2
        )
        assert global_step == 2 * steps
        assert rest == expected[at:]
