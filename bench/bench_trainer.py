"""Trainer throughput on the CPU against a plain-JAX implementation of the same model.

    python bench/bench_trainer.py

Both sides run the same model (RMSNorm pre-norm blocks, rotary, grouped-query attention,
SwiGLU, untied LM head, blocks scanned with rematerialisation), the same loss, bf16 compute
with float32 parameters, and optax AdamW with gradient clipping, on the same random
batches. Marin's side is the trainer's own jitted update (``make_update_fn``, donating the
whole ``TrainerState``) on the haliax model; the reference is written here with jax.numpy
only. Reported: tokens per second after compilation (median of timed steps) and the ratio
(goal: at least 0.9).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from marin.models import TransformerConfig
from marin.models.transformer import TransformerLM
from marin.training.hyperparameters import OptimizerHyperparameters
from marin.training.optimizer import build_optimizer
from marin.training.state import TrainerState, make_update_fn

DTYPE = jnp.bfloat16


def plain_init(c: TransformerConfig, key) -> dict:
    h, hd, kv, q, m, layers = (c.hidden_dim, c.head_dim, c.num_kv_heads, c.num_heads,
                               c.intermediate_dim, c.num_layers)
    ks = jax.random.split(key, 9)

    def w(k, *shape):
        return jax.random.normal(k, shape, jnp.float32) / np.sqrt(shape[-2])

    return {"embed": jax.random.normal(ks[0], (c.vocab_size, h)) * 0.02,
            "wq": w(ks[1], layers, h, q * hd), "wk": w(ks[2], layers, h, kv * hd),
            "wv": w(ks[3], layers, h, kv * hd), "wo": w(ks[4], layers, q * hd, h),
            "up": w(ks[5], layers, h, m), "gate": w(ks[6], layers, h, m),
            "down": w(ks[7], layers, m, h), "n1": jnp.ones((layers, h)),
            "n2": jnp.ones((layers, h)), "nf": jnp.ones((h,)), "head": w(ks[8], h, c.vocab_size)}


def rms(x, scale):
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + 1e-5)).astype(
        x.dtype) * scale


def rope(x, theta):  # x: (b, s, heads, hd)
    half = x.shape[-1] // 2
    inv = 1.0 / theta ** (jnp.arange(half) / half)
    ang = jnp.arange(x.shape[1])[:, None] * inv[None]
    cos, sin = jnp.cos(ang)[None, :, None].astype(x.dtype), jnp.sin(ang)[None, :, None].astype(
        x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def plain_forward(p: dict, tokens, c: TransformerConfig):
    b, s = tokens.shape
    hd, kv, g = c.head_dim, c.num_kv_heads, c.num_heads // c.num_kv_heads
    x = p["embed"][tokens]
    mask = jnp.tril(jnp.ones((s, s), bool))

    @jax.checkpoint
    def block(x, lp):
        y = rms(x, lp["n1"])
        q = rope((y @ lp["wq"]).reshape(b, s, kv, g, hd).reshape(b, s, kv * g, hd),
                 c.rope_theta).reshape(b, s, kv, g, hd)
        k = rope((y @ lp["wk"]).reshape(b, s, kv, hd), c.rope_theta)
        v = (y @ lp["wv"]).reshape(b, s, kv, hd)
        scores = jnp.einsum("bqkgd,bskd->bkgqs", q, k).astype(jnp.float32) / np.sqrt(hd)
        weights = jax.nn.softmax(jnp.where(mask, scores, -1e9), -1).astype(x.dtype)
        out = jnp.einsum("bkgqs,bskd->bqkgd", weights, v).reshape(b, s, kv * g * hd)
        x = x + out @ lp["wo"]
        y = rms(x, lp["n2"])
        return x + (jax.nn.silu(y @ lp["gate"]) * (y @ lp["up"])) @ lp["down"], None

    stacked = {k: p[k] for k in ("wq", "wk", "wv", "wo", "up", "gate", "down", "n1", "n2")}
    x, _ = jax.lax.scan(block, x, stacked)
    return rms(x, p["nf"]) @ p["head"]


def plain_loss(p, tokens, c):
    cp = jax.tree.map(lambda a: a.astype(DTYPE), p)
    logits = plain_forward(cp, tokens, c).astype(jnp.float32)[:, :-1]
    targets = tokens[:, 1:]
    log_z = jax.nn.logsumexp(logits, -1)
    return jnp.mean(log_z - jnp.take_along_axis(logits, targets[..., None], -1)[..., 0])


def median_step_time(step, state, batches) -> float:
    """Median seconds per ``state = step(state, batch)`` after the first (compiling) call.
    Each side gets its own copy of the batches: marin's update donates what it is given."""
    batches = [jnp.array(b, copy=True) for b in batches]
    state = step(state, batches[0])  # compile
    jax.block_until_ready(state)
    times = []
    for batch in batches[1:]:
        t0 = time.perf_counter()
        state = step(state, batch)
        jax.block_until_ready(state)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(c: TransformerConfig, batch: int, steps: int = 12) -> tuple[float, float]:
    hyper = OptimizerHyperparameters(learning_rate=1e-3, adam_learning_rate=1e-3, epsilon=1e-8,
                                     beta1=0.9, beta2=0.95, max_grad_norm=1.0,
                                     optimizer="adamw", warmup_fraction=0.0)
    rng = np.random.default_rng(0)
    batches = [jnp.asarray(rng.integers(0, c.vocab_size, (batch, c.seq_len)), jnp.int32)
               for _ in range(steps)]

    model = TransformerLM.init(c, key=jax.random.PRNGKey(0))
    tx, _ = build_optimizer(hyper, 10_000, eqx.filter(model, eqx.is_inexact_array))
    ours = make_update_fn(tx, 0.0, DTYPE)
    ours_t = median_step_time(lambda state, b: ours(state, b)[0], TrainerState.init(model, tx),
                              batches)

    params = plain_init(c, jax.random.PRNGKey(0))
    ptx = optax.chain(optax.clip_by_global_norm(1.0),
                      optax.adamw(1e-3, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.0))

    @jax.jit
    def plain_step(p, o, tokens):
        grads = jax.grad(plain_loss)(p, tokens, c)
        updates, o = ptx.update(grads, o, p)
        return optax.apply_updates(p, updates), o

    plain_t = median_step_time(lambda state, b: plain_step(*state, b),
                               (params, ptx.init(params)), batches)
    tokens = batch * c.seq_len
    return tokens / ours_t, tokens / plain_t


def main() -> None:
    configs = [
        ("small", TransformerConfig(hidden_dim=128, intermediate_dim=512, num_layers=4,
                                    num_heads=4, num_kv_heads=2, vocab_size=4096, seq_len=128), 8),
        ("medium", TransformerConfig(hidden_dim=256, intermediate_dim=768, num_layers=6,
                                     num_heads=4, num_kv_heads=4, vocab_size=8192,
                                     seq_len=256), 8),
    ]
    for name, c, batch in configs:
        ours, plain = bench(c, batch)
        print(f"{name:>6} ({c.num_params() / 1e6:.1f}M params, batch {batch} x {c.seq_len}): "
              f"marin {ours:,.0f} tok/s, plain JAX {plain:,.0f} tok/s, ratio {ours / plain:.2f} "
              "(goal >= 0.9)")


if __name__ == "__main__":
    main()
