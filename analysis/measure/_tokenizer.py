"""The tokenizer adapters: whatever the user passes, as a spec that travels and an encoder.

:func:`tokenizer_spec` recognises a ``tokenizer.json`` path or a local Hugging Face folder (loaded
offline), a ``tokenizers.Tokenizer``, a ``transformers`` tokenizer (with its chat template), an
object with tiktoken's ``encode_ordinary_batch`` or a callable, and reduces it to a picklable
:class:`Spec` with a content digest for the cache; :class:`Encoder` counts tokens of batches
with it, through the Rust batch API where there is one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import pickle
import signal
import site
import sys
import sysconfig
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias

import numpy as np


class Encodes(Protocol):
    """A tokenizer object: ``tokenizers.Tokenizer``, a ``transformers`` tokenizer, or a tiktoken
    encoding (each has an ``encode`` method; which one it is decides how it is called)."""

    def encode(self, text: str, /, *args: Any, **kwargs: Any) -> Any: ...


#: What :func:`analysis.measure_lengths` takes as its tokenizer: a ``tokenizer.json`` path or a
#: local Hugging Face folder, a tokenizer object, or a callable from text to token ids.
TokenizerLike: TypeAlias = str | os.PathLike[str] | Encodes | Callable[[str], Sequence[int]]


@dataclass(frozen=True)
class Spec:
    """A tokenizer in a form that can travel to a worker process or a Dask worker."""

    kind: str  # "tokenizers" (obj: its JSON), "transformers", "tiktoken", "callable"
    obj: Any
    add_special_tokens: bool
    digest: str | None  # content hash for the cache; None: not cacheable


def sha(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def is_instance(obj: Any, module: str, name: str) -> bool:
    """``isinstance(obj, module.name)`` without importing ``module`` if nobody has."""
    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return cls is not None and isinstance(obj, cls)


def _load_tokenizer(path: Path) -> Any:
    """A tokenizer from a ``tokenizer.json`` file or a local Hugging Face directory, offline."""
    if not path.exists():
        raise ValueError(f"{path}: no such tokenizer file or directory")
    try:
        if path.is_file():
            from tokenizers import Tokenizer

            return Tokenizer.from_file(str(path))
        if not (path / "tokenizer_config.json").is_file() and (path / "tokenizer.json").is_file():
            from tokenizers import Tokenizer

            return Tokenizer.from_file(str(path / "tokenizer.json"))
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        # Never the folder's own Python: trust_remote_code=False also means transformers
        # refuses at once where it would otherwise ask "run the custom code? [y/N]" on stdin.
        level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # its warnings about the folder's config: not ours to print
        try:
            return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
        finally:
            hf_logging.set_verbosity(level)
    except ImportError as err:
        raise ValueError(
            f"{path}: loading a tokenizer needs the 'measure' extra "
            f"(pip install 'padding-workbench[measure]'): {err}"
        ) from None
    except Exception as err:  # noqa: BLE001 - any loader failure is one line naming the path
        if "trust_remote_code" in str(err):
            raise ValueError(
                f"{path}: this tokenizer folder names its own Python code (auto_map), which the "
                "workbench never runs; pass its tokenizer.json, or load the tokenizer yourself "
                "and pass the object to measure_lengths"
            ) from None
        raise ValueError(f"{path}: cannot load a tokenizer: {' '.join(str(err).split())}") from None


#: The files of a tokenizer folder that make the tokenizer (not a model's weights beside it):
#: their contents are hashed for the cache key (the rest by size and mtime) and for a report's
#: provenance.
TOKENIZER_FILES = (
    "tokenizer",
    "special_tokens",
    "added_tokens",
    "vocab",
    "merges",
    "chat_template",
    "config",
    "spiece",
)


def path_digest(tokenizer: str | os.PathLike[str]) -> str:
    """A content digest of a tokenizer given as a path, without loading it (nor importing its
    library): the file's bytes, or a folder's tokenizer files' bytes (``tokenizer*``,
    vocabularies, merges, chat templates, configs, ``*.model``) and every other file's name,
    size and modification time; the installed tokenizer libraries' versions.  A cache key
    from it lets a cached run answer before ``transformers`` is imported.

    Raises
    ------
    ValueError
        The path does not exist (the message :func:`tokenizer_spec` gives).
    """
    from importlib.metadata import PackageNotFoundError, version

    path = Path(os.path.expanduser(os.fspath(tokenizer)))
    if not path.exists():
        raise ValueError(f"{path}: no such tokenizer file or directory")
    versions = []
    for name in ("tokenizers", "transformers"):
        try:
            versions.append(f"{name}={version(name)}")
        except PackageNotFoundError:
            versions.append(f"{name}=none")
    parts: list[bytes | str] = ["path", ",".join(versions)]
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
    for file in files:
        info = file.stat()
        hashed = (
            file is path or file.name.startswith(TOKENIZER_FILES) or file.suffix in (".model", ".tiktoken")
        )
        parts += [file.name, file.read_bytes() if hashed else f"{info.st_size}:{info.st_mtime_ns}"]
    return sha(*parts)


def tokenizer_spec(tokenizer: Any, *, add_special_tokens: bool, chat: bool) -> Spec:
    """Recognise the tokenizer kind and check that it can do what is asked."""
    if isinstance(tokenizer, str | os.PathLike):
        tokenizer = _load_tokenizer(Path(os.path.expanduser(os.fspath(tokenizer))))
    is_transformers = is_instance(tokenizer, "transformers", "PreTrainedTokenizerBase")
    if chat:
        if not is_transformers:
            raise ValueError(
                f"tokenizer: chat_field= needs a transformers tokenizer with a chat "
                f"template, got {type(tokenizer).__name__}"
            )
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                "tokenizer: has no chat template, which chat_field= needs (set "
                "tokenizer.chat_template or pass field= for plain text)"
            )
    if is_instance(tokenizer, "tokenizers", "Tokenizer"):
        text = tokenizer.to_str()
        return Spec("tokenizers", text, add_special_tokens, sha("tokenizers", _versions("tokenizers"), text))
    if is_transformers:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        state = backend.to_str() if backend is not None else pickle_or_none(tokenizer)
        special = json.dumps(getattr(tokenizer, "special_tokens_map", {}), sort_keys=True, default=str)
        digest = (
            None
            if state is None
            else sha(
                "transformers",
                _versions("tokenizers", "transformers"),
                type(tokenizer).__qualname__,
                state,
                str(getattr(tokenizer, "chat_template", None)),
                special,
            )
        )
        return Spec("transformers", tokenizer, add_special_tokens, digest)
    if callable(getattr(tokenizer, "encode_ordinary_batch", None)):
        state = pickle_or_none(tokenizer)
        return Spec(
            "tiktoken", tokenizer, add_special_tokens, None if state is None else sha("tiktoken", state)
        )
    if callable(tokenizer):
        state = pickle_or_none(tokenizer)
        try:
            body = None if state is None else _code_digest(tokenizer)
        except RecursionError:  # code reaching too far to walk: measured, never cached
            body = None
        return Spec(
            "callable",
            tokenizer,
            add_special_tokens,
            None if state is None or body is None else sha("callable", state, body),
        )
    raise ValueError(
        f"tokenizer: expected a path, a tokenizers.Tokenizer, a transformers "
        "tokenizer, a tiktoken encoding or a callable, got "
        f"{type(tokenizer).__name__}"
    )


def _versions(*modules: str) -> str:
    """The versions of the tokenizer libraries in use: their behaviour is part of the answer."""
    return ",".join(f"{m}={getattr(sys.modules.get(m), '__version__', '?')}" for m in modules)


#: Folders of the standard library and installed packages: code there is named by version.
_LIBRARY_DIRS = tuple(
    os.path.realpath(p)
    for p in [
        *(sysconfig.get_paths().get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")),
        site.getusersitepackages(),
    ]
    if p
)


def _is_library(module: str | None) -> bool:
    mod = sys.modules.get(module or "")
    if mod is None:
        return True  # not imported here: nothing to read (builtins, C extensions)
    file = getattr(mod, "__file__", None)
    if file is None:
        return module not in ("__main__", "__mp_main__")  # a notebook's or REPL's own code
    return os.path.realpath(str(file)).startswith(_LIBRARY_DIRS)


def _code_digest(tokenizer: Any) -> str:
    """A hash of the code a callable tokenizer runs, as loaded: its own code and that of every
    function, class or module of the project (not a library) it reaches through its globals,
    with their constants; a library is named by its version.  So editing a helper it calls
    (and reloading it, or a new process) is another cache entry."""
    parts: list[bytes] = []
    seen: set[int] = set()

    def library(module: str | None) -> None:
        top = (module or "").partition(".")[0]
        parts.append(f"{top}={getattr(sys.modules.get(top), '__version__', '?')}".encode())

    def visit_code(code: types.CodeType, namespace: dict[str, Any]) -> None:
        parts.append(marshal.dumps(code))
        for name in code.co_names:
            if name in namespace:
                visit(namespace[name])
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                visit_code(const, namespace)

    def visit(value: Any) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, str | bytes | int | float | complex | bool | type(None)):
            parts.append(repr(value)[:4096].encode())
        elif isinstance(value, tuple | frozenset):
            for item in value:
                visit(item)
        elif isinstance(value, types.ModuleType):
            if _is_library(value.__name__):
                library(value.__name__)
            else:
                for item in list(vars(value).values()):
                    if getattr(item, "__module__", None) == value.__name__:
                        visit(item)
        elif isinstance(value, types.MethodType):
            visit(value.__func__)
            visit(type(value.__self__))
        elif isinstance(value, types.FunctionType):
            if _is_library(value.__module__):
                library(value.__module__)
                return
            parts.append(value.__qualname__.encode())
            visit(value.__defaults__)
            visit_code(value.__code__, value.__globals__)
        elif isinstance(value, type):
            if _is_library(value.__module__):
                library(value.__module__)
            else:
                for item in list(vars(value).values()):
                    visit(getattr(item, "__func__", item))
        elif callable(value) or hasattr(value, "__dict__"):
            visit(type(value))  # an instance: its class's code (its state is pickled)
            func = getattr(value, "func", None)  # functools.partial
            if func is not None:
                visit(func)

    visit(tokenizer)
    return sha(*parts)


def pickle_or_none(obj: Any) -> bytes | None:
    try:
        return pickle.dumps(obj)
    except Exception:  # noqa: BLE001 - lambdas, closures, objects holding handles
        return None


class Encoder:
    """Counts tokens of batches of texts or conversations with one :class:`Spec`."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.backend: Any = None
        if spec.kind == "tokenizers":
            from tokenizers import Tokenizer

            self.backend = Tokenizer.from_str(spec.obj)
        elif spec.kind == "transformers" and getattr(spec.obj, "backend_tokenizer", None):
            from tokenizers import Tokenizer

            self.backend = Tokenizer.from_str(spec.obj.backend_tokenizer.to_str())
        if self.backend is not None:  # lengths are untruncated and unpadded
            self.backend.no_truncation()
            self.backend.no_padding()

    def texts(self, texts: list[str]) -> np.ndarray:
        """Token counts of ``texts`` (int64)."""
        spec = self.spec
        if self.backend is not None:
            encode = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)
            counts: Iterable[int] = map(len, encode(texts, add_special_tokens=spec.add_special_tokens))
        elif spec.kind == "transformers":
            ids = spec.obj(
                texts,
                add_special_tokens=spec.add_special_tokens,
                return_attention_mask=False,
                return_token_type_ids=False,
            )["input_ids"]
            counts = map(len, ids)
        elif spec.kind == "tiktoken":
            counts = map(len, spec.obj.encode_ordinary_batch(texts))
        else:
            return _callable_lengths(spec.obj(texts), len(texts))
        return np.fromiter(counts, dtype=np.int64, count=len(texts))

    def chats(self, conversations: list[list[dict[str, Any]]]) -> np.ndarray:
        """Token counts of ``conversations`` rendered by the tokenizer's chat template: each
        rendered (within :data:`TEMPLATE_SECONDS` and :data:`MAX_RENDERED_CHARS`), then the
        texts tokenized as ``apply_chat_template(..., tokenize=True)`` does (no special
        tokens added: the template has them)."""
        rendered = [self._render(chat) for chat in conversations]
        if self.backend is not None:
            encode = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)
            counts: Iterable[int] = map(len, encode(rendered, add_special_tokens=False))
        else:
            ids = self.spec.obj(
                rendered, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False
            )["input_ids"]
            counts = map(len, ids)
        return np.fromiter(counts, dtype=np.int64, count=len(conversations))

    def _render(self, chat: list[dict[str, Any]]) -> str:
        with _time_limit(TEMPLATE_SECONDS):
            text = self.spec.obj.apply_chat_template(chat, tokenize=False)
        if not isinstance(text, str):
            raise ValueError(f"the chat template rendered a {type(text).__name__}, not text")
        if len(text) > MAX_RENDERED_CHARS:
            raise ValueError(
                f"the chat template rendered {len(text):,} characters for one conversation, over "
                f"the {MAX_RENDERED_CHARS >> 20} Mi limit (MAX_RENDERED_CHARS)"
            )
        return text


#: The longest one conversation's chat template may take to render, in seconds (a template
#: that loops is stopped there; in this process and worker processes, not on Dask's threads).
TEMPLATE_SECONDS = 10.0
#: The longest rendered conversation, in characters (what :data:`MAX_RECORD_BYTES` is to text).
MAX_RENDERED_CHARS = 8 << 20


class _TemplateTimeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Stop the block with a one-line ``ValueError`` after ``seconds`` (a SIGALRM timer, so
    only in a main thread whose timer is free; elsewhere the block runs unbounded)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or not hasattr(signal, "setitimer")
        or signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0)
    ):
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise _TemplateTimeout

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _TemplateTimeout:
        raise ValueError(
            f"the chat template ran for over {seconds:g} s on one conversation (a loop?); nothing was counted"
        ) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _callable_lengths(result: Any, expected: int) -> np.ndarray:
    arr = np.asarray(result)
    if arr.ndim != 1 or arr.shape[0] != expected:
        raise ValueError(
            f"tokenizer: the callable returned {arr.shape} for {expected} texts; expected one length per text"
        )
    if arr.dtype.kind not in "iu" or (arr.size and int(arr.min()) < 0):
        raise ValueError(
            f"tokenizer: the callable must return non-negative integer lengths, got dtype {arr.dtype}"
        )
    return arr.astype(np.int64)
