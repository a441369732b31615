"""A torch dataset whose item ``i`` is ``i``: the sampler and resume tests share it."""

from __future__ import annotations

import torch


class IndexDataset(torch.utils.data.Dataset):
    """Item ``i`` is ``i`` (so a batch shows which samples it holds)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i
