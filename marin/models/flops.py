"""FLOP and parameter accounting for decoder-only transformer language models.

    forward_flops_per_token(hidden_dim=768, intermediate_dim=3072, num_layers=12,
                            num_heads=12, num_kv_heads=12, seq_len=1024, vocab_size=50257,
                            glu=False)           # about 2 * params + attention

Forward FLOPs per token follow Levanter's ``lm_flops_per_token``, the accounting Marin and
Levanter use for MFU: every matmul counts 2 FLOPs per multiply-add; attention is counted as
a full (not causal-halved) ``seq_len x seq_len`` map per head, megatron-style, including
the softmax mask (3 per entry); the LM head counts ``2 * hidden * vocab``. Training costs
3 times the forward pass (forward, plus backward at twice the forward):
``TransformerConfig.training_flops_per_token()``. This is the one accounting of training
FLOPs in marin: candidates' budgets, the trainer's MFU and the fits' budgets all use it.
"""

from __future__ import annotations


def forward_flops_per_token(hidden_dim: int, intermediate_dim: int, num_layers: int,
                            num_heads: int, num_kv_heads: int, seq_len: int, vocab_size: int,
                            glu: bool) -> float:
    head_dim = hidden_dim / num_heads
    mlp = 2 * (3 if glu else 2) * hidden_dim * intermediate_dim
    qkv = 2 * hidden_dim * (num_heads * head_dim + 2 * num_kv_heads * head_dim)
    out_proj = 2 * hidden_dim * hidden_dim
    logits = 2 * seq_len**2 * num_heads * head_dim
    mask = 3 * seq_len**2 * num_heads
    values = 2 * seq_len**2 * num_heads * head_dim
    attention = (logits + mask + values) / seq_len
    lm_head = 2 * hidden_dim * vocab_size
    return num_layers * (mlp + qkv + out_proj + attention) + lm_head


def parameter_count(hidden_dim: int, intermediate_dim: int, num_layers: int, num_heads: int,
                    num_kv_heads: int, vocab_size: int, glu: bool, tie_embeddings: bool) -> int:
    """Trainable parameters: embeddings, attention, MLP, RMS norms (scale only), LM head."""
    head_dim = hidden_dim // num_heads
    attention = hidden_dim * head_dim * (num_heads + 2 * num_kv_heads) + hidden_dim * hidden_dim
    mlp = (3 if glu else 2) * hidden_dim * intermediate_dim
    norms = 2 * hidden_dim
    embeddings = vocab_size * hidden_dim * (1 if tie_embeddings else 2)
    return num_layers * (attention + mlp + norms) + hidden_dim + embeddings

