"""The trainer's state and the jitted functions that advance and evaluate it.

    state = TrainerState.init(model, tx)
    update = make_update_fn(tx, z_weight=1e-7, dtype=jnp.bfloat16)
    state, metrics = update(state, tokens)      # one optimizer step; ``state`` is donated
    float(metrics["loss"]), int(state.step)

    # hyperparameters as inputs of the program, carried by the state (one compile for all):
    state = TrainerState.init(model, optimizer.transformation(values), hyper=values)
    update = make_traced_update_fn(optimizer, dtype=jnp.bfloat16)
    state, metrics = update(state, tokens)      # metrics["learning_rate"] too

    # gradient accumulation: 4 micro-steps per optimizer step (``check_batch_layout``)
    update = make_traced_update_fn(optimizer, dtype=jnp.bfloat16, microbatches=4)

Design note: everything a step changes (the step count, the model, the optimizer state) is
one ``equinox.Module``, and the update donates it whole (``filter_jit(donate="all")``).
XLA then writes the new parameters and moments into the buffers of the old ones, so an
accelerator holds one copy of each, not two: the 16 bytes per parameter that
``marin.models.memory`` budgets (fp32 parameters, gradients and two Adam moments). A caller
must not touch a state (or a batch) after passing it to ``update``: its buffers are gone.
The state also carries the optimizer's ``HyperValues`` (``marin.training.optimizer``), so
that learning rates and schedule lengths are inputs of the compiled update, not constants;
they are not checkpointed (a run's config gives them).

With ``microbatches`` > 1 the update scans (``jax.lax.scan``) over that many equal slices of
the batch, sums their float32 gradients in the loop's carry and applies one optimizer
step to the mean: the activations of one slice are live at a time, at the price of one
more float32 gradient buffer (``marin.models.memory`` counts it). Slice ``k`` holds rows
``k, k + n, k + 2n, ...`` of the batch, so each device's rows stay on that device and every
slice is spread over all devices as the whole batch was (data parallelism and FSDP
unchanged, no data moves between devices). Every sequence has the same number of predicted
tokens (no padding, no masks), so the mean of the slices' token means is the batch's.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import equinox as eqx
import haliax as hax
import jax
import jax.numpy as jnp

from marin.models.transformer import Axes, TransformerLM


class TrainerState(eqx.Module):
    """What one training step reads and replaces.

    Attributes:
        step: optimizer steps taken so far (an int32 scalar array).
        model: the model, float32 parameters.
        opt_state: the optax state of the model's inexact arrays.
        hyper: the optimizer's ``HyperValues`` for ``make_traced_update_fn`` (else None).
    """

    step: jax.Array
    model: TransformerLM
    opt_state: Any
    hyper: Any = None

    @staticmethod
    def init(model: TransformerLM, tx: Any, step: int = 0, hyper: Any = None
             ) -> TrainerState:
        return TrainerState(jnp.asarray(step, jnp.int32), model,
                            tx.init(eqx.filter(model, eqx.is_inexact_array)), hyper)


def loss_fn(model: TransformerLM, tokens: jnp.ndarray, z_weight: float, dtype: Any
            ) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(training loss, next-token NLL): the mean NLL plus ``z_weight * mean(log Z ** 2)``;
    activations and matmuls in ``dtype``, logits in float32."""
    ax = Axes(model.config)
    compute = jax.tree.map(lambda x: x.astype(dtype) if eqx.is_inexact_array(x) else x, model)
    Batch = hax.Axis("batch", tokens.shape[0])
    logits = compute(hax.named(tokens, (Batch, ax.Pos))).array.astype(jnp.float32)
    logits, targets = logits[:, :-1], tokens[:, 1:]
    log_z = jax.nn.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    nll = jnp.mean(log_z - picked)
    return nll + z_weight * jnp.mean(log_z**2), nll


def make_update_fn(tx: Any, z_weight: float, dtype: Any, microbatches: int = 1
                   ) -> Callable[[TrainerState, jax.Array], tuple[TrainerState, dict]]:
    """The jitted optimizer step: ``update(state, tokens) -> (state, {"loss", "grad_norm"})``,
    donating ``state`` (and ``tokens``); ``tx`` and ``z_weight`` are constants of it. The
    gradient is accumulated over ``microbatches`` slices of the batch (1: none)."""
    return _jit_update(lambda state: tx, lambda state: z_weight, None, dtype, microbatches)


def make_traced_update_fn(optimizer: Any, dtype: Any, microbatches: int = 1
                          ) -> Callable[[TrainerState, jax.Array], tuple[TrainerState, dict]]:
    """As ``make_update_fn``, for an ``Optimizer`` whose values the state carries
    (``state.hyper``); the metrics also hold the step's ``learning_rate``. One function per
    program in this process (see ``_programs``): a later run of the same optimizer, dtype
    and micro-steps gets the function an earlier one compiled."""
    key = ("update", _optimizer_key(optimizer), jnp.dtype(dtype).name, microbatches)
    return _programs.get(key, lambda: eqx.filter_jit(
        make_traced_step(optimizer, dtype, microbatches), donate="all"))


def make_packed_update_fn(optimizer: Any, dtype: Any, microbatches: int = 1
                          ) -> Callable[[TrainerState, jax.Array], tuple[TrainerState, dict]]:
    """``make_traced_update_fn``'s update vmapped over a leading axis of runs (a pack,
    ``marin.training.packing``): a stacked state and one batch per run; one function per
    program in this process, as there."""
    key = ("pack", _optimizer_key(optimizer), jnp.dtype(dtype).name, microbatches)
    return _programs.get(key, lambda: eqx.filter_jit(eqx.filter_vmap(
        make_traced_step(optimizer, dtype, microbatches)), donate="all"))


def make_traced_step(optimizer: Any, dtype: Any, microbatches: int = 1
                     ) -> Callable[[TrainerState, jax.Array], tuple[TrainerState, dict]]:
    """The body of ``make_traced_update_fn``'s update, not jitted: what a caller transforms
    further (``marin.training.packing`` vmaps it over the runs of a pack)."""
    return _update_step(lambda state: optimizer.transformation(state.hyper),
                        lambda state: state.hyper.z_loss_weight if optimizer.z_loss else 0.0,
                        lambda state: optimizer.schedule(state.hyper)(state.step), dtype,
                        microbatches)


def _jit_update(tx_of: Callable[[TrainerState], Any], z_of: Callable[[TrainerState], Any],
                lr_of: Callable[[TrainerState], Any] | None, dtype: Any, microbatches: int
                ) -> Callable[[TrainerState, jax.Array], tuple[TrainerState, dict]]:
    return eqx.filter_jit(_update_step(tx_of, z_of, lr_of, dtype, microbatches),
                          donate="all")


def _update_step(tx_of: Callable[[TrainerState], Any], z_of: Callable[[TrainerState], Any],
                 lr_of: Callable[[TrainerState], Any] | None, dtype: Any, microbatches: int
                 ) -> Callable[[TrainerState, jax.Array], tuple[TrainerState, dict]]:
    if microbatches < 1:
        raise ValueError(f"microbatches must be at least 1, got {microbatches}")

    def update(state: TrainerState, tokens: jax.Array) -> tuple[TrainerState, dict]:
        tx = tx_of(state)
        nll, grads = _gradients(state.model, tokens, z_of(state), dtype, microbatches)
        params = eqx.filter(state.model, eqx.is_inexact_array)
        updates, opt_state = tx.update(grads, state.opt_state, params)
        model = eqx.apply_updates(state.model, updates)
        grad_norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree.leaves(grads)))
        metrics = {"loss": nll, "grad_norm": grad_norm}
        if lr_of is not None:
            metrics["learning_rate"] = lr_of(state)
        return TrainerState(state.step + 1, model, opt_state, state.hyper), metrics

    return update


def _gradients(model: TransformerLM, tokens: jax.Array, z_weight: Any, dtype: Any,
               microbatches: int) -> tuple[jax.Array, Any]:
    """(mean NLL, gradient of the mean training loss) of a batch, over ``microbatches``
    slices of it one after the other (see the design note)."""
    value_and_grad = eqx.filter_value_and_grad(loss_fn, has_aux=True)
    if microbatches == 1:
        (_, nll), grads = value_and_grad(model, tokens, z_weight, dtype)
        return nll, grads
    rows, length = tokens.shape
    if rows % microbatches:
        raise ValueError(f"a batch of {rows} sequences does not split into {microbatches} "
                         "micro-batches")
    # [B, S] -> [B/n, n, S] -> [n, B/n, S]: slice k is rows k, k+n, ...; a device's rows
    # (a contiguous block of B/devices, n of them per row of B/n) stay on it
    slices = tokens.reshape(rows // microbatches, microbatches, length).swapaxes(0, 1)

    def accumulate(carry: tuple[jax.Array, Any], batch: jax.Array
                   ) -> tuple[tuple[jax.Array, Any], None]:
        nll_sum, grad_sum = carry
        (_, nll), grads = value_and_grad(model, batch, z_weight, dtype)
        grad_sum = jax.tree.map(lambda a, g: a + g.astype(jnp.float32), grad_sum, grads)
        return (nll_sum + nll, grad_sum), None

    zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32),
                         eqx.filter(model, eqx.is_inexact_array))
    (nll_sum, grad_sum), _ = jax.lax.scan(accumulate, (jnp.zeros((), jnp.float32), zeros),
                                          slices)
    return nll_sum / microbatches, jax.tree.map(lambda g: g / microbatches, grad_sum)


def make_eval_fn(dtype: Any) -> Callable[[TransformerLM, jax.Array], jax.Array]:
    """The jitted mean next-token NLL of a batch (nothing donated); one per dtype in this
    process, as ``make_traced_update_fn``."""

    def build() -> Callable[[TransformerLM, jax.Array], jax.Array]:
        @eqx.filter_jit
        def evaluate(model: TransformerLM, tokens: jax.Array) -> jax.Array:
            return loss_fn(model, tokens, 0.0, dtype)[1]

        return evaluate

    return _programs.get(("eval", jnp.dtype(dtype).name), build)


class _Programs:
    """The jitted functions of this process, by everything their closure holds that shapes
    their programs; each keeps its compiled programs by the shapes it was called with.

    Design note: ``eqx.filter_jit`` keeps what it traced and compiled in the function
    object, so a run that made a new one traced and compiled (or loaded from the persistent
    cache, ``marin.training.compilation``) again: about a second of CPU per run for a tiny
    model, more than its steps. Runs of one shape in one process (a study under the local
    runner) now share the function, so only the first traces. The key holds every value the
    function closes over; what else shapes a program (the model's and the batch's shapes and
    dtypes, the static fields) is jit's own key. The newest ``SIZE`` functions are kept."""

    SIZE = 32

    def __init__(self) -> None:
        self._functions: dict[Any, Callable] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, build: Callable[[], Callable]) -> Callable:
        with self._lock:
            function = self._functions.pop(key, None) or build()
            self._functions[key] = function  # the newest last
            while len(self._functions) > self.SIZE:
                del self._functions[next(iter(self._functions))]
            return function


_programs = _Programs()


def _optimizer_key(optimizer: Any) -> tuple:
    """An ``Optimizer`` as a hashable value: its fields, its labels' tree and leaves."""
    fields = {f.name: getattr(optimizer, f.name) for f in dataclasses.fields(optimizer)}
    labels = fields.pop("labels")
    return (tuple(sorted(fields.items())), jax.tree.structure(labels),
            tuple(jax.tree.leaves(labels)))


class CompileClock:
    """Seconds JAX spent tracing, lowering and compiling in this thread while open.

        with CompileClock() as clock:
            state, metrics = update(state, tokens)
        clock.seconds          # 0.0 once the step is compiled

    It listens to JAX's own compile-duration events (``jax.monitoring``), so a step that
    compiles (the first one, or any recompilation) can report its compute time alone.
    """

    PREFIX = "/jax/core/compile/"

    def __init__(self) -> None:
        self.seconds = 0.0
        self._thread = threading.get_ident()

    def _listen(self, event: str, duration: float, **_: Any) -> None:
        if event.startswith(self.PREFIX) and threading.get_ident() == self._thread:
            self.seconds += duration

    def __enter__(self) -> CompileClock:
        self.seconds, self._thread = 0.0, threading.get_ident()
        self._started = time.perf_counter()
        jax.monitoring.register_event_duration_secs_listener(self._listen)
        return self

    def __exit__(self, *exc: object) -> None:
        jax.monitoring.unregister_event_duration_listener(self._listen)
        self.elapsed = time.perf_counter() - self._started
