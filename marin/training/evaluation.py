"""Scoring held-out sets: next-token loss and bits per byte, per set and over all of them.

    validation = Validation(sets, eval_fn, batch_size=8, batches=4)
    validation.evaluate(model)   # {"eval/plays/loss": ..., "eval/plays/bpb": ...,
                                 #  "eval/macro_loss": ..., "eval/loss": ..., ...}

A set's bits per byte are its mean loss (nats per predicted token) times its cache's tokens
per byte (the validation split's tokens over the UTF-8 bytes of its text, counted when it
was tokenized), over ln 2. With named sets, ``eval/macro_*`` are the means over the sets and
``eval/loss``, ``eval/bpb`` the figures of all the sets' scored tokens together (Levanter's
micro figures): total nats over total tokens, total bits over total bytes. Without names
(the training cache's own split), only ``eval/loss`` and ``eval/bpb`` are recorded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from marin.training import metric_names as names

__all__ = ["EvalSet", "Validation"]


@dataclass(frozen=True)
class EvalSet:
    """One held-out set: ``name`` (None: the training cache's own split), its sequences
    (a ``TokenCacheDataset`` of the validation split) and its tokens per byte."""

    name: str | None
    data: Any
    tokens_per_byte: float


@dataclass(frozen=True)
class Validation:
    """Every set's first ``batches`` batches of ``batch_size`` sequences, scored by
    ``eval_fn(model, tokens)`` (the mean next-token loss of a batch); ``place`` puts a
    batch (every host's whole batch) on the devices."""

    sets: tuple[EvalSet, ...]
    eval_fn: Callable[[Any, jax.Array], jax.Array]
    batch_size: int
    batches: int
    place: Callable[[np.ndarray], jax.Array] = jnp.asarray

    def _mean_loss(self, model: Any, data: Any) -> tuple[float, int]:
        count = min(self.batches * self.batch_size, data.num_sequences)
        total = 0.0
        for start in range(0, count, self.batch_size):
            stop = min(count, start + self.batch_size)
            batch = np.stack([data.sequence(i) for i in range(start, stop)])
            total += float(self.eval_fn(model, self.place(batch))) * len(batch)
        return total / count, count

    def evaluate(self, model: Any) -> dict[str, float]:
        out: dict[str, float] = {}
        nats = tokens = bits = text_bytes = 0.0
        for s in self.sets:
            loss, count = self._mean_loss(model, s.data)
            bpb = loss * s.tokens_per_byte / math.log(2)
            out[names.eval_name(s.name, "loss")] = loss
            out[names.eval_name(s.name, "bpb")] = bpb
            scored = count * (s.data.seq_len - 1)  # every token after a sequence's first
            nats, tokens = nats + loss * scored, tokens + scored
            bits, text_bytes = bits + bpb * scored / s.tokens_per_byte, \
                text_bytes + scored / s.tokens_per_byte
        if any(s.name is not None for s in self.sets):
            named = [s.name for s in self.sets]
            out[names.EVAL_MACRO_LOSS] = float(np.mean([out[names.eval_name(n, "loss")]
                                                        for n in named]))
            out[names.EVAL_MACRO_BPB] = float(np.mean([out[names.eval_name(n, "bpb")]
                                                       for n in named]))
            out[names.EVAL_LOSS], out[names.EVAL_BPB] = nats / tokens, bits / text_bytes
        return out

    def hook(self, done: int, state: Any, record: dict[str, Any]) -> None:
        record.update(self.evaluate(state.model))
