"""The gradient-noise model as a file: one ``.npz`` (NumPy's zip of arrays), written and read
back exactly."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from analysis.timing.noise import GradientNoise

#: The format's version, stored in the file; a file of another version is refused.
NOISE_FORMAT = 1
_ARRAYS = ("means", "within", "mean_variance", "replicate_gram", "replicate_within")
_INTS = ("edges", "bin_samples", "groups")


def _ints(values: np.ndarray) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(values).reshape(-1).tolist())


def save_gradient_noise(model: GradientNoise, path: str | os.PathLike[str]) -> Path:
    """Write ``model`` to ``path`` (an ``.npz`` file; overwritten); :func:`load_gradient_noise`
    reads it back exactly.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from analysis.timing.noise import toy_model
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     p = save_gradient_noise(toy_model(), pathlib.Path(tmp) / "noise.npz")
    ...     back = load_gradient_noise(p)
    >>> back.edges, bool((back.gram == toy_model().gram).all())
    ((0, 10, 100), True)
    """
    if not isinstance(model, GradientNoise):
        raise ValueError(f"expected a GradientNoise model, got {type(model).__name__}")
    path = Path(path)
    arrays: dict[str, Any] = {name: np.asarray(getattr(model, name), dtype=float) for name in _ARRAYS}
    arrays.update({name: np.asarray(getattr(model, name), dtype=np.int64) for name in _INTS})
    arrays.update(format=np.int64(NOISE_FORMAT), group_size=np.int64(model.group_size))
    with path.open("wb") as handle:
        np.savez(handle, **arrays)
    return path


def load_gradient_noise(path: str | os.PathLike[str]) -> GradientNoise:
    """Read a gradient-noise model written by :func:`save_gradient_noise` (``--noise FILE``).

    Errors are one line naming the file: missing, not an ``.npz`` of a model, another format
    version, or arrays that do not fit together.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     p = pathlib.Path(tmp) / "noise.npz"
    ...     _ = p.write_text("edges,bins\\n")
    ...     load_gradient_noise(p)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: .../noise.npz: not a gradient-noise file (.npz)
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        with np.load(path, allow_pickle=False) as data:
            fields = {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError):
        raise ValueError(f"{path}: not a gradient-noise file (.npz)") from None
    missing = [n for n in ("format", "group_size", *_ARRAYS, *_INTS) if n not in fields]
    if missing:
        raise ValueError(f"{path}: not a gradient-noise file (missing {', '.join(missing)})")
    if int(fields["format"]) != NOISE_FORMAT:
        raise ValueError(
            f"{path}: gradient-noise format {int(fields['format'])}, this version reads {NOISE_FORMAT}"
        )
    try:
        return GradientNoise(
            edges=_ints(fields["edges"]),
            bin_samples=_ints(fields["bin_samples"]),
            groups=_ints(fields["groups"]),
            group_size=int(fields["group_size"]),
            means=np.asarray(fields["means"], dtype=float),
            within=np.asarray(fields["within"], dtype=float),
            mean_variance=np.asarray(fields["mean_variance"], dtype=float),
            replicate_gram=np.asarray(fields["replicate_gram"], dtype=float),
            replicate_within=np.asarray(fields["replicate_within"], dtype=float),
        )
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path}: {err}") from None
