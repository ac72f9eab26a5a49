"""Scoring tasks under a model: each choice's log-likelihood, then acc, acc_norm and bpb.

    suite = TaskSuite.of([("plays-cloze", items)], encoder, seq_len=64, rows=8)
    suite.evaluate(model)   # {"lm_eval/plays-cloze/acc": ..., "lm_eval/plays-cloze/acc_norm":
                            #  ..., "lm_eval/plays-cloze/bpb": ..., "lm_eval/averages/acc": ...}

Each choice is scored as lm-eval (0.4) scores a continuation: whitespace at the end of the
context moves to the start of the choice; the context is encoded, then the context and the
choice together, and the choice's tokens are those of the whole after the context's count
(so a token that spans the boundary counts as the choice's); the choice's text is taken as
written (no separator is added: a choice that continues after a space starts with one). The
log-likelihood is the sum of the log probabilities of the choice's tokens, each given every
token before it. A sequence longer
than the model's ``seq_len`` loses tokens of the context from its start; shorter ones are
scored at the task's own length (its longest sequence, rounded up to a multiple of 16),
which the model reads as it reads its training sequences' first tokens. Per item (lm-eval's
definitions): ``acc`` is 1 when the gold choice has the highest log-likelihood, ``acc_norm``
when it has the highest log-likelihood per UTF-8 byte of the choice, and ``bpb`` is the gold
choice's bits per byte, ``-loglik / ln 2 / bytes``. A task's figures are the means over its
items; ``lm_eval/averages/*`` the means over the tasks.

Design note: a task's items are padded into batches of one fixed shape, ``[items_per_batch,
choices, length]`` (``choices``: the task's largest count; padded choices score ``-inf``),
with a mask of the choice's tokens; the last batch is filled with empty items. The batches
go to the devices once, and one jitted call scores them all, a batch at a time
(``jax.lax.map``): one dispatch per task and evaluation, one compilation per task shape.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import equinox as eqx
import haliax as hax
import jax
import jax.numpy as jnp
import numpy as np

from marin.evaluation.tasks import AVERAGES, QUANTITIES, TaskError, TaskItem, metric_name
from marin.models.transformer import Axes

__all__ = ["EncodedTask", "TaskSuite", "at_length", "encode_task", "item_scores",
           "make_loglik_fn"]

#: a task's sequences are padded to a multiple of this many tokens (at most ``seq_len``)
_LENGTH_STEP = 16


@dataclass(frozen=True)
class EncodedTask:
    """A task's items as arrays: ``tokens`` and ``mask`` (the choice's tokens) of shape
    ``[items, choices, length]`` (``length``: the longest sequence rounded up to a multiple
    of 16, at most ``seq_len``), each choice's UTF-8 bytes (0: a padded choice), the
    gold indices, and the task file's fingerprint (``task_fingerprint``) when known."""

    name: str
    tokens: np.ndarray
    mask: np.ndarray
    choice_bytes: np.ndarray
    gold: np.ndarray
    fingerprint: str | None = None


def encode_task(name: str, items: Sequence[TaskItem], encoder: Any, seq_len: int,
                fingerprint: str | None = None) -> EncodedTask:
    """The arrays of ``items`` under ``encoder`` (``marin.processing.tokenize.encoders``);
    a choice of ``seq_len`` tokens or more fails naming the task and the item."""
    width = max(len(item.choices) for item in items)
    contexts, choices = _encode_pairs(name, items, encoder)
    longest = max(len(c) + len(k) for c, ks in zip(contexts, choices, strict=True) for k in ks)
    length = min(seq_len, -(-longest // _LENGTH_STEP) * _LENGTH_STEP)
    tokens = np.zeros((len(items), width, length), np.int32)
    mask = np.zeros((len(items), width, length), bool)
    choice_bytes = np.zeros((len(items), width), np.float64)
    for i, (item, context) in enumerate(zip(items, contexts, strict=True)):
        for c, choice in enumerate(choices[i]):
            if len(choice) >= seq_len:
                raise TaskError(f"task {name!r} item {i + 1}: choice {c} is {len(choice)} "
                                f"tokens, more than the model's seq_len={seq_len} allows")
            sequence = (list(context) + list(choice))[-length:]
            tokens[i, c, :len(sequence)] = sequence
            mask[i, c, len(sequence) - len(choice):len(sequence)] = True
            choice_bytes[i, c] = len(item.choices[c].encode("utf-8"))
    return EncodedTask(name, tokens, mask, choice_bytes,
                       np.array([item.gold for item in items], np.int64), fingerprint)


def _encode_pairs(name: str, items: Sequence[TaskItem], encoder: Any
                  ) -> tuple[list[list[int]], list[list[list[int]]]]:
    """Each item's context tokens and its choices' tokens, split as lm-eval's
    ``TemplateLM._encode_pair`` splits them (the module's docstring)."""
    stripped = [item.context.rstrip() for item in items]
    contexts = encoder.encode_batch(stripped)
    choices = []
    for i, (item, context, tokens) in enumerate(zip(items, stripped, contexts, strict=True)):
        moved = item.context[len(context):]
        wholes = encoder.encode_batch([context + moved + choice for choice in item.choices])
        choices.append([list(whole[len(tokens):]) for whole in wholes])
        for c, choice in enumerate(choices[-1]):
            if not choice:
                raise TaskError(f"task {name!r} item {i + 1}: choice {c} "
                                f"({item.choices[c]!r}) has no token of its own: it merges "
                                "into the context's last token; start it with a space")
    return contexts, choices


def at_length(model: Any, length: int) -> Any:
    """``model`` reading sequences of ``length`` tokens: the same parameters (none depends
    on the sequence length: positions are rotary), its config's ``seq_len`` changed."""
    if length == model.config.seq_len:
        return model
    config = dataclasses.replace(model.config, seq_len=length)
    like = eqx.filter_eval_shape(type(model).init, config, key=jax.random.PRNGKey(0))
    return jax.tree.unflatten(jax.tree.structure(like), jax.tree.leaves(model))


def make_loglik_fn(dtype: Any) -> Callable[[Any, jax.Array, jax.Array], jax.Array]:
    """The jitted log-likelihood of each masked span: ``(model, tokens, mask)`` of shape
    ``[batches, items, choices, seq_len]`` to ``[batches, items, choices]``, one batch at a
    time (``jax.lax.map``: one batch's activations are live); activations in ``dtype``."""

    @eqx.filter_jit
    def logliks(model: Any, tokens: jax.Array, mask: jax.Array) -> jax.Array:
        short = at_length(model, tokens.shape[-1])
        cast = jax.tree.map(lambda x: x.astype(dtype) if eqx.is_inexact_array(x) else x, short)
        pos = Axes(short.config).Pos

        def one(batch: tuple[jax.Array, jax.Array]) -> jax.Array:
            items, choices, length = batch[0].shape
            rows = batch[0].reshape(items * choices, length)
            named = hax.named(rows, (hax.Axis("batch", len(rows)), pos))
            logp = jax.nn.log_softmax(cast(named).array.astype(jnp.float32)[:, :-1], axis=-1)
            picked = jnp.take_along_axis(logp, rows[:, 1:, None], axis=-1)[..., 0]
            spans = jnp.where(batch[1].reshape(items * choices, length)[:, 1:], picked, 0.0)
            return spans.sum(axis=-1).reshape(items, choices)

        return jax.lax.map(one, (tokens, mask))

    return logliks


def item_scores(logliks: np.ndarray, choice_bytes: np.ndarray, gold: np.ndarray
                ) -> dict[str, np.ndarray]:
    """Each item's ``acc``, ``acc_norm`` and ``bpb`` from its choices' log-likelihoods
    (``[items, choices]``; a choice of 0 bytes is padding)."""
    real = choice_bytes > 0
    ll = np.where(real, logliks, -np.inf)
    per_byte = np.where(real, ll / np.where(real, choice_bytes, 1.0), -np.inf)
    rows = np.arange(len(gold))
    return {"acc": (ll.argmax(axis=1) == gold).astype(np.float64),
            "acc_norm": (per_byte.argmax(axis=1) == gold).astype(np.float64),
            "bpb": -ll[rows, gold] / math.log(2) / choice_bytes[rows, gold]}


@dataclass(frozen=True)
class TaskSuite:
    """A run's tasks, scored ``items_per_batch = max(1, rows // choices)`` items at a time
    by ``loglik_fn``; ``place`` puts a task's batches on the devices (once: they are kept
    for the later evaluations)."""

    tasks: tuple[EncodedTask, ...]
    loglik_fn: Callable[[Any, jax.Array, jax.Array], jax.Array]
    rows: int
    place: Callable[[np.ndarray], jax.Array] = jnp.asarray
    _placed: dict[str, tuple[jax.Array, jax.Array]] = field(default_factory=dict, repr=False,
                                                            compare=False)

    @staticmethod
    def of(tasks: Sequence[tuple[str, Sequence[TaskItem]]], encoder: Any, seq_len: int,
           rows: int, dtype: Any = jnp.float32,
           place: Callable[[np.ndarray], jax.Array] = jnp.asarray) -> TaskSuite:
        return TaskSuite(tuple(encode_task(name, items, encoder, seq_len)
                               for name, items in tasks), make_loglik_fn(dtype), rows, place)

    def logliks(self, model: Any, task: EncodedTask) -> np.ndarray:
        """``[items, choices]``: each choice's log-likelihood under ``model``."""
        count, width = task.tokens.shape[:2]
        if task.name not in self._placed:  # on the devices once, at the first evaluation
            per_batch = max(1, self.rows // width)
            self._placed[task.name] = tuple(self.place(_batched(a, per_batch))
                                            for a in (task.tokens, task.mask))
        scores = np.asarray(self.loglik_fn(model, *self._placed[task.name]))
        return scores.reshape(-1, width)[:count]

    def evaluate(self, model: Any) -> dict[str, float]:
        out: dict[str, float] = {}
        for task in self.tasks:
            scores = item_scores(self.logliks(model, task), task.choice_bytes, task.gold)
            for quantity in QUANTITIES:
                out[metric_name(task.name, quantity)] = float(scores[quantity].mean())
        for quantity in QUANTITIES:
            out[metric_name(AVERAGES, quantity)] = float(np.mean(
                [out[metric_name(t.name, quantity)] for t in self.tasks]))
        return out

    def hook(self, done: int, state: Any, record: dict[str, Any]) -> None:
        record.update(self.evaluate(state.model))


def _batched(items: np.ndarray, size: int) -> np.ndarray:
    """``items`` as ``[batches, size, ...]``, the last batch filled with empty items."""
    batches = -(-len(items) // size)
    filled = np.zeros((batches * size, *items.shape[1:]), items.dtype)
    filled[:len(items)] = items
    return filled.reshape(batches, size, *items.shape[1:])
