"""Gradient accumulation: the compiled step's peak temporary memory and its throughput
against one pass over the whole batch, measured in the same run.

    python bench/bench_accumulation.py [--hidden 256 --layers 4 --batch 16 --rounds 8]

The step is the trainer's own jitted update (``make_traced_update_fn``, hyperparameters as
inputs, the state donated) on one device, for micro-batches of the whole batch, 1/2, 1/4
and 1/8 of it. Memory: ``temp_size_in_bytes`` of the compiled step's
``memory_analysis()`` (the buffers XLA allocates besides the inputs and outputs), with the
planner's estimate of the activations (``marin.models.memory``) beside it. Throughput: the
median step time over ``--rounds`` timed rounds after compilation; the variants take turns
within each round, so a change in the machine's load reaches all of them alike. Goals: the
memory falls as the micro-batch falls; accumulated steps keep at least 0.95 of the whole
batch's tokens per second.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from marin.models import TransformerConfig
from marin.models.memory import activation_bytes_per_sequence
from marin.models.transformer import TransformerLM
from marin.training.hyperparameters import OptimizerHyperparameters
from marin.training.optimizer import Optimizer
from marin.training.state import TrainerState, make_traced_update_fn

HYPER = OptimizerHyperparameters(learning_rate=1e-3, adam_learning_rate=1e-3, epsilon=1e-8,
                                 beta1=0.9, beta2=0.95, optimizer="adamw", weight_decay=0.1)


class Variant:
    """One micro-batch size: its compiled update, its own state, its step times."""

    def __init__(self, config: TransformerConfig, batch: int, micro: int, dtype) -> None:
        self.micro, self.times = micro, []
        model = TransformerLM.init(config, key=jax.random.PRNGKey(0))
        optimizer = Optimizer.of(HYPER, 10_000, eqx.filter(model, eqx.is_inexact_array))
        values = optimizer.values(HYPER, 10_000)
        self.state = TrainerState.init(model, optimizer.transformation(values), hyper=values)
        self.update = make_traced_update_fn(optimizer, dtype, batch // micro)
        tokens = jnp.zeros((batch, config.seq_len), jnp.int32)
        compiled = self.update.lower(self.state, tokens).lowered.compile()
        self.temp_bytes = compiled.memory_analysis().temp_size_in_bytes

    def step(self, tokens: np.ndarray, timed: bool) -> None:
        batch = jnp.asarray(tokens)  # a fresh copy: the update donates what it is given
        started = time.perf_counter()
        self.state, metrics = self.update(self.state, batch)
        jax.block_until_ready(metrics["loss"])
        if timed:
            self.times.append(time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    config = TransformerConfig(hidden_dim=args.hidden, intermediate_dim=3 * args.hidden,
                               num_layers=args.layers, num_heads=4, num_kv_heads=4,
                               vocab_size=args.vocab, seq_len=args.seq)
    micros = [m for m in (args.batch, args.batch // 2, args.batch // 4, args.batch // 8)
              if m >= 1 and args.batch % m == 0]
    print(f"model {config.num_params() / 1e6:.1f}M params, batch {args.batch} x {args.seq}, "
          f"{args.dtype}, {jax.device_count()} {jax.devices()[0].platform} device(s)")
    variants = [Variant(config, args.batch, m, jnp.dtype(args.dtype)) for m in micros]
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, args.vocab, (args.batch, args.seq), dtype=np.int32)
               for _ in range(args.rounds + 1)]
    for i, tokens in enumerate(batches):  # round 0 runs each program once, untimed
        for variant in variants:
            variant.step(tokens, timed=i > 0)

    full = variants[0]
    full_time = statistics.median(full.times)
    estimate = activation_bytes_per_sequence(config)
    print(f"{'micro-batch':>11} {'micro-steps':>11} {'temp memory':>12} {'vs whole':>9} "
          f"{'planned activations':>20} {'step time':>10} {'throughput vs whole':>20}")
    for v in variants:
        median = statistics.median(v.times)
        print(f"{v.micro:>11} {args.batch // v.micro:>11} {v.temp_bytes / 2**20:>9.1f} MiB "
              f"{v.temp_bytes / full.temp_bytes:>9.2f} {v.micro * estimate / 2**20:>16.1f} MiB "
              f"{median:>9.3f}s {full_time / median:>20.3f}")
    falling = all(a.temp_bytes > b.temp_bytes for a, b in itertools.pairwise(variants))
    worst = min(full_time / statistics.median(v.times) for v in variants[1:])
    print(f"memory falls with the micro-batch: {'yes' if falling else 'NO'}; lowest "
          f"throughput ratio {worst:.3f} (goal >= 0.95)")


if __name__ == "__main__":
    main()
