"""Published facts of the case this project comes from (an LLM trained on 8 GPUs).

902,087 samples of 65..8,192 tokens (mean 2,068; 1.866 B tokens), batch size 8.  Sorted
batching ran at ~32 Ktok/s, a full random shuffle at ~12 Ktok/s; a 6-bucket shuffle with
greedy-searched edges was predicted at ~28 Ktok/s and measured at 25.1 Ktok/s.
"""

from __future__ import annotations

__all__ = [
    "CASE_N_SAMPLES",
    "CASE_MIN_LENGTH",
    "CASE_MAX_LENGTH",
    "CASE_MEAN_LENGTH",
    "CASE_TOTAL_TOKENS",
    "CASE_BATCH_SIZE",
    "CASE_EDGES",
    "CASE_GEOMETRIC_EDGES",
    "CASE_SORTED_TOKENS_PER_S",
    "CASE_RANDOM_TOKENS_PER_S",
    "CASE_BUCKETED_TOKENS_PER_S",
]

CASE_N_SAMPLES = 902_087
CASE_MIN_LENGTH = 65
CASE_MAX_LENGTH = 8_192
CASE_MEAN_LENGTH = 2_068
CASE_TOTAL_TOKENS = 1_866_000_000  # published as "1.866 B" (rounded)
CASE_BATCH_SIZE = 8
#: The case's final 6-bucket edges, found by greedy search (estimated efficiency 0.868).
CASE_EDGES = (0, 770, 1216, 1728, 2432, 3296, 8192)
#: The geometric start of that search (estimated efficiency 0.774).
CASE_GEOMETRIC_EDGES = (0, 147, 329, 735, 1642, 3667, 8192)
CASE_SORTED_TOKENS_PER_S = 32_000
CASE_RANDOM_TOKENS_PER_S = 12_000
CASE_BUCKETED_TOKENS_PER_S = 25_100  # measured; the case's model predicted ~28,000
