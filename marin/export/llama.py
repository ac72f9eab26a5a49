"""marin's ``TransformerLM`` in Hugging Face's Llama layout: ``config.json`` and tensors.

    check_expressible(model.config)          # ExportError for a shape Llama has no field for
    config = llama_config(model, eos_id=50256)               # the dict of config.json
    tensors = llama_tensors(model)           # {"model.layers.0.self_attn.q_proj.weight": ...}

The two models are the same function, so the mapping only renames and reshapes:

- RMSNorm before attention and before the MLP (``input_layernorm``,
  ``post_attention_layernorm``), and after the last block (``model.norm``), with the
  epsilon of marin's norms (``rms_norm_eps``).
- Rotary positions: marin rotates the pairs ``(i, i + head_dim / 2)`` of each head with
  frequencies ``theta ** (-2i / head_dim)``, which is transformers' ``rotate_half``
  convention, so queries and keys need no permutation (checkpoints of Meta's own Llama,
  which rotate adjacent pairs, do; these do not).
- Grouped-query attention: marin's query heads are laid out ``(kv_heads, q_per_kv,
  head_size)``, so flattened, query head ``h`` reads key/value head ``h // q_per_kv``, as
  transformers' ``repeat_kv`` does.
- A SwiGLU MLP: ``down(silu(gate(x)) * up(x))``. Llama has no field for a GELU MLP with
  two matrices, so ``glu=False`` models are refused.
- Tied embeddings: no ``lm_head.weight``, ``tie_word_embeddings: true``.

Each haliax weight is laid out by its axis names (``(Out..., In...)``, the layout of
``torch.nn.Linear``) before it is flattened, never by the order haliax happens to keep.
"""

from __future__ import annotations

from typing import Any

from marin.export.run import ExportError
from marin.models.config import TransformerConfig

__all__ = ["check_expressible", "llama_config", "llama_tensors"]


def check_expressible(config: TransformerConfig) -> None:
    """Raise ``ExportError`` naming the field when Llama's layout cannot hold the model."""
    if not config.glu:
        raise ExportError("TransformerConfig.glu=False (a GELU MLP with two matrices) has no "
                          "Llama equivalent: Llama's MLP is SwiGLU (gate, up, down); only "
                          "models trained with glu=True can be exported")
    if config.head_dim % 2:
        raise ExportError(f"TransformerConfig.head_dim={config.head_dim} is odd: rotary "
                          "positions rotate pairs of dimensions; use an even "
                          "hidden_dim / num_heads")


def llama_config(model: Any, eos_id: int) -> dict[str, Any]:
    """The ``config.json`` of ``LlamaForCausalLM`` for ``model`` (a ``TransformerLM``)."""
    config: TransformerConfig = model.config
    check_expressible(config)
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_dim,
        "intermediate_size": config.intermediate_dim,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_kv_heads,
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": config.seq_len,
        "rms_norm_eps": float(model.final_norm.eps),
        "rope_theta": float(config.rope_theta),
        # transformers 5 reads the rotary settings here; 4.x reads rope_theta above
        "rope_parameters": {"rope_type": "default", "rope_theta": float(config.rope_theta)},
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "tie_word_embeddings": config.tie_embeddings,
        "bos_token_id": eos_id,  # marin's documents are separated by one end-of-text token
        "eos_token_id": eos_id,
        "initializer_range": 0.02,
        "use_cache": True,
        "torch_dtype": "float32",
        "dtype": "float32",
    }


def llama_tensors(model: Any) -> dict[str, Any]:
    """Every parameter of ``model`` as a float32 numpy array under its Llama name."""
    import haliax as hax
    import numpy as np

    config: TransformerConfig = model.config
    check_expressible(config)

    def matrix(linear: Any, stacked: bool) -> np.ndarray:
        """A (stacked) haliax Linear as torch's (out, in), per layer when stacked."""
        lead = [linear.weight.resolve_axis("layers")] if stacked else []
        weight = hax.rearrange(linear.weight, (*lead, *_axes(linear.Out), *_axes(linear.In)))
        out, inp = _size(linear.Out), _size(linear.In)
        return np.asarray(weight.array, dtype=np.float32).reshape(
            (*(a.size for a in lead), out, inp))

    def vector(norm: Any, stacked: bool) -> np.ndarray:
        weight = hax.rearrange(norm.weight, ("layers", "embed") if stacked else ("embed",))
        return np.asarray(weight.array, dtype=np.float32)

    block = model.layers.stacked
    per_layer = {
        "input_layernorm.weight": vector(block.attn_norm, True),
        "self_attn.q_proj.weight": matrix(block.attn.q_proj, True),
        "self_attn.k_proj.weight": matrix(block.attn.k_proj, True),
        "self_attn.v_proj.weight": matrix(block.attn.v_proj, True),
        "self_attn.o_proj.weight": matrix(block.attn.o_proj, True),
        "post_attention_layernorm.weight": vector(block.mlp_norm, True),
        "mlp.gate_proj.weight": matrix(block.mlp.gate, True),
        "mlp.up_proj.weight": matrix(block.mlp.up, True),
        "mlp.down_proj.weight": matrix(block.mlp.down, True),
    }
    embed = hax.rearrange(model.embedding.weight, ("vocab", "embed"))
    tensors = {"model.embed_tokens.weight": np.asarray(embed.array, dtype=np.float32),
               "model.norm.weight": vector(model.final_norm, False)}
    for layer in range(config.num_layers):
        for name, stacked in per_layer.items():
            tensors[f"model.layers.{layer}.{name}"] = np.ascontiguousarray(stacked[layer])
    if model.lm_head is not None:
        tensors["lm_head.weight"] = matrix(model.lm_head, False)
    return tensors


def _axes(spec: Any) -> tuple[Any, ...]:
    return tuple(spec) if isinstance(spec, (tuple, list)) else (spec,)


def _size(spec: Any) -> int:
    size = 1
    for axis in _axes(spec):
        size *= axis.size
    return size
