"""FLOP and parameter accounting against independent references."""

from __future__ import annotations

import pytest

from marin.models import TransformerConfig
from marin.models.flops import forward_flops_per_token

# GPT-2 small as released by OpenAI: 124,439,808 parameters (Radford et al. 2019; the
# Hugging Face checkpoint's count). It has learned positions, biases and LayerNorm biases,
# which marin's model does not; adding them back must give the published total.
GPT2_SMALL_PARAMS = 124_439_808


def test_parameter_count_matches_gpt2_small():
    h, layers, ctx, vocab = 768, 12, 1024, 50257
    ours = TransformerConfig(hidden_dim=h, intermediate_dim=4 * h, num_layers=layers,
                             num_heads=12, num_kv_heads=12, vocab_size=vocab, seq_len=ctx,
                             glu=False, tie_embeddings=True).num_params()
    positions = ctx * h
    biases = layers * (3 * h + h + 4 * h + h)  # qkv, attention out, mlp in, mlp out
    layernorm_biases = (2 * layers + 1) * h  # RMSNorm has scales only
    assert ours + positions + biases + layernorm_biases == GPT2_SMALL_PARAMS


def test_forward_flops_are_twice_the_matmul_parameters_plus_attention():
    cfg = TransformerConfig(hidden_dim=1024, intermediate_dim=4096, num_layers=8,
                            num_heads=8, num_kv_heads=8, vocab_size=32000, seq_len=2048,
                            glu=False, tie_embeddings=False)
    matmul_params = cfg.num_params() - cfg.vocab_size * cfg.hidden_dim \
        - (2 * cfg.num_layers + 1) * cfg.hidden_dim  # no FLOPs in lookups and norm scales
    attention = cfg.num_layers * (4 * cfg.seq_len * cfg.hidden_dim
                                  + 3 * cfg.seq_len * cfg.num_heads)
    assert cfg.forward_flops_per_token() == pytest.approx(2 * matmul_params + attention)
    assert cfg.training_flops_per_token() == 3 * cfg.forward_flops_per_token()


def test_grouped_query_attention_and_glu_change_the_count_as_expected():
    base = dict(hidden_dim=512, intermediate_dim=2048, num_layers=4, num_heads=8,
                seq_len=1024, vocab_size=1000)
    mha = forward_flops_per_token(**base, num_kv_heads=8, glu=False)
    gqa = forward_flops_per_token(**base, num_kv_heads=2, glu=False)
    assert mha - gqa == pytest.approx(4 * 2 * 512 * (2 * 6 * 64))  # 6 fewer K and V heads
    glu = forward_flops_per_token(**base, num_kv_heads=8, glu=True)
    assert glu - mha == pytest.approx(4 * 2 * 512 * 2048)


def test_training_flops_are_palms_model_flops_plus_the_attention_mask():
    # PaLM (Chowdhery et al. 2022, appendix B): model FLOPs per training token are
    # 6 N + 12 L H Q T, N the parameters doing matmuls (the LM head included), L layers,
    # H heads of size Q, T the sequence length (attention not halved for causality). The
    # Levanter accounting adds the softmax mask: 3 FLOPs per score, times three passes.
    cfg = TransformerConfig(hidden_dim=2048, intermediate_dim=5632, num_layers=16,
                            num_heads=16, num_kv_heads=4, vocab_size=50257, seq_len=4096)
    matmul_params = cfg.num_params() - cfg.vocab_size * cfg.hidden_dim \
        - (2 * cfg.num_layers + 1) * cfg.hidden_dim  # lookups and norm scales do no matmul
    palm = 6 * matmul_params + 12 * cfg.num_layers * cfg.num_heads * cfg.head_dim * cfg.seq_len
    mask = 3 * 3 * cfg.num_layers * cfg.num_heads * cfg.seq_len
    assert cfg.training_flops_per_token() == pytest.approx(palm + mask, rel=1e-12)
    assert cfg.training_flops_per_token() > 6 * cfg.num_params() * 0.9  # near 6N, not 2N


@pytest.mark.parametrize("field", ["hidden_dim", "num_layers", "vocab_size"])
def test_non_positive_shapes_are_refused_naming_the_field(field):
    shape = dict(hidden_dim=64, intermediate_dim=256, num_layers=2, num_heads=2,
                 num_kv_heads=2, vocab_size=100, seq_len=32)
    shape[field] = 0
    with pytest.raises(ValueError, match=f"TransformerConfig.{field} must be positive"):
        TransformerConfig(**shape)
