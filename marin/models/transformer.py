"""The decoder-only transformer language model, in haliax with named axes.

    model = TransformerLM.init(config, key=jax.random.PRNGKey(0))
    logits = model(tokens)          # tokens: NamedArray (batch, position) -> (..., vocab)

Pre-norm blocks (RMSNorm), rotary positions, grouped-query attention, a SwiGLU (or GELU)
MLP, optional tied embeddings. The blocks are stacked along a ``layers`` axis and run with
``haliax.fold`` (a scan), so compile time does not grow with depth; each block is
rematerialised in the backward pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import equinox as eqx
import haliax as hax
import haliax.nn as hnn
import jax
import jax.numpy as jnp
from haliax import Axis, NamedArray

from marin.models.config import TransformerConfig


@dataclass(frozen=True)
class Axes:
    """Named axes of one model config."""

    config: TransformerConfig

    @property
    def Pos(self) -> Axis:
        return Axis("position", self.config.seq_len)

    @property
    def KPos(self) -> Axis:
        return Axis("key_position", self.config.seq_len)

    @property
    def Embed(self) -> Axis:
        return Axis("embed", self.config.hidden_dim)

    @property
    def KVHeads(self) -> Axis:
        return Axis("kv_heads", self.config.num_kv_heads)

    @property
    def QPerKV(self) -> Axis:
        return Axis("q_per_kv", self.config.num_heads // self.config.num_kv_heads)

    @property
    def HeadSize(self) -> Axis:
        return Axis("head_size", self.config.head_dim)

    @property
    def Mlp(self) -> Axis:
        return Axis("mlp", self.config.intermediate_dim)

    @property
    def Vocab(self) -> Axis:
        return Axis("vocab", self.config.vocab_size)

    @property
    def Layers(self) -> Axis:
        return Axis("layers", self.config.num_layers)


def rotary(x: NamedArray, Pos: Axis, HeadSize: Axis, theta: float) -> NamedArray:
    """Rotate pairs (i, i + d/2) of the head dimension by position-dependent angles."""
    half = HeadSize.size // 2
    inv_freq = 1.0 / theta ** (jnp.arange(0, half, dtype=jnp.float32) / half)
    angles = jnp.arange(Pos.size, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    order = [a for a in x.axes if a.name not in (Pos.name, HeadSize.name)] + [Pos, HeadSize]
    arr = hax.rearrange(x, order).array
    x1, x2 = arr[..., :half], arr[..., half:]
    c, s = cos.astype(arr.dtype), sin.astype(arr.dtype)
    out = jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    return hax.rearrange(hax.named(out, order), x.axes)


class Attention(eqx.Module):
    q_proj: hnn.Linear
    k_proj: hnn.Linear
    v_proj: hnn.Linear
    o_proj: hnn.Linear
    config: TransformerConfig = eqx.field(static=True)

    @staticmethod
    def init(config: TransformerConfig, *, key) -> Attention:
        ax = Axes(config)
        kq, kk, kv, ko = jax.random.split(key, 4)
        return Attention(
            hnn.Linear.init(In=ax.Embed, Out=(ax.KVHeads, ax.QPerKV, ax.HeadSize), key=kq,
                            use_bias=False),
            hnn.Linear.init(In=ax.Embed, Out=(ax.KVHeads, ax.HeadSize), key=kk, use_bias=False),
            hnn.Linear.init(In=ax.Embed, Out=(ax.KVHeads, ax.HeadSize), key=kv, use_bias=False),
            hnn.Linear.init(In=(ax.KVHeads, ax.QPerKV, ax.HeadSize), Out=ax.Embed, key=ko,
                            use_bias=False),
            config)

    def __call__(self, x: NamedArray) -> NamedArray:
        ax = Axes(self.config)
        theta = self.config.rope_theta
        q = rotary(self.q_proj(x), ax.Pos, ax.HeadSize, theta)
        k = rotary(self.k_proj(x), ax.Pos, ax.HeadSize, theta).rename({ax.Pos: ax.KPos})
        v = self.v_proj(x).rename({ax.Pos: ax.KPos})
        mask = hnn.attention.causal_mask(ax.Pos, ax.KPos)
        out = hnn.attention.dot_product_attention(ax.KPos, ax.HeadSize, q, k, v, mask=mask,
                                                  attention_dtype=jnp.float32)
        return self.o_proj(out.astype(x.dtype))


class Mlp(eqx.Module):
    up: hnn.Linear
    gate: hnn.Linear | None
    down: hnn.Linear

    @staticmethod
    def init(config: TransformerConfig, *, key) -> Mlp:
        ax = Axes(config)
        ku, kg, kd = jax.random.split(key, 3)
        gate = hnn.Linear.init(In=ax.Embed, Out=ax.Mlp, key=kg, use_bias=False) \
            if config.glu else None
        return Mlp(hnn.Linear.init(In=ax.Embed, Out=ax.Mlp, key=ku, use_bias=False), gate,
                   hnn.Linear.init(In=ax.Mlp, Out=ax.Embed, key=kd, use_bias=False))

    def __call__(self, x: NamedArray) -> NamedArray:
        if self.gate is not None:
            hidden = hnn.silu(self.gate(x)) * self.up(x)
        else:
            hidden = hnn.gelu(self.up(x))
        return self.down(hidden)


class Block(eqx.Module):
    attn_norm: hnn.RmsNorm
    attn: Attention
    mlp_norm: hnn.RmsNorm
    mlp: Mlp

    @staticmethod
    def init(config: TransformerConfig, *, key) -> Block:
        ax = Axes(config)
        ka, km = jax.random.split(key)
        return Block(hnn.RmsNorm.init(ax.Embed, use_bias=False), Attention.init(config, key=ka),
                     hnn.RmsNorm.init(ax.Embed, use_bias=False), Mlp.init(config, key=km))

    def __call__(self, x: NamedArray) -> NamedArray:
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class TransformerLM(eqx.Module):
    embedding: hnn.Embedding
    layers: hnn.Stacked
    final_norm: hnn.RmsNorm
    lm_head: hnn.Linear | None
    config: TransformerConfig = eqx.field(static=True)

    @staticmethod
    def init(config: TransformerConfig, *, key) -> TransformerLM:
        ax = Axes(config)
        ke, kl, kh = jax.random.split(key, 3)
        layers = hnn.Stacked.init(ax.Layers, Block, gradient_checkpointing=True)(
            config, key=jax.random.split(kl, config.num_layers))
        head = None if config.tie_embeddings else hnn.Linear.init(
            In=ax.Embed, Out=ax.Vocab, key=kh, use_bias=False)
        # haliax scales init_scale by 1/hidden: this gives GPT-2's standard deviation of 0.02.
        embedding = hnn.Embedding.init(ax.Vocab, ax.Embed, key=ke,
                                       init_scale=0.02 * config.hidden_dim)
        return TransformerLM(embedding, layers, hnn.RmsNorm.init(ax.Embed, use_bias=False),
                             head, config)

    def __call__(self, tokens: NamedArray) -> NamedArray:
        x = self.embedding(tokens)
        x = self.layers.fold(x)
        x = self.final_norm(x)
        if self.lm_head is None:
            return hax.dot(x, self.embedding.weight, axis=Axes(self.config).Embed)
        return self.lm_head(x)
