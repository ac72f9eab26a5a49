"""The language model's shape: one config shared by the scaling sweep and the trainer.

    config = TransformerConfig(hidden_dim=512, intermediate_dim=2048, num_layers=8,
                               num_heads=4, num_kv_heads=4, vocab_size=50257, seq_len=4096)
    config.num_params()                  # trainable parameters
    config.training_flops_per_token()    # what the sweep budgets and the trainer's MFU use
"""

from __future__ import annotations

from dataclasses import dataclass

from marin.models import flops


@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer (pre-norm, RMSNorm, rotary positions, optional GLU MLP).

    Attributes:
        hidden_dim: width of the residual stream.
        intermediate_dim: width of the MLP's hidden layer.
        num_layers: transformer blocks.
        num_heads: query heads; ``hidden_dim`` must be a multiple of it.
        num_kv_heads: key/value heads (grouped-query attention when fewer than num_heads).
        vocab_size: tokenizer vocabulary.
        seq_len: training sequence length (attention FLOPs depend on it).
        glu: a gated (SwiGLU) MLP with three matrices instead of two.
        tie_embeddings: share the input embedding and the LM head.
        rope_theta: base of the rotary position embedding.
    """

    hidden_dim: int
    intermediate_dim: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    vocab_size: int
    seq_len: int
    glu: bool = True
    tie_embeddings: bool = False
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        for name in ("hidden_dim", "intermediate_dim", "num_layers", "num_heads",
                     "num_kv_heads", "vocab_size", "seq_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"TransformerConfig.{name} must be positive, "
                                 f"got {getattr(self, name)}")
        if self.hidden_dim % self.num_heads:
            raise ValueError(f"TransformerConfig.hidden_dim ({self.hidden_dim}) must be a "
                             f"multiple of num_heads ({self.num_heads})")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"TransformerConfig.num_heads ({self.num_heads}) must be a "
                             f"multiple of num_kv_heads ({self.num_kv_heads})")

    @property
    def head_dim(self) -> int:
        return self.hidden_dim // self.num_heads

    def _shape(self) -> dict[str, int | bool]:
        return {"hidden_dim": self.hidden_dim, "intermediate_dim": self.intermediate_dim,
                "num_layers": self.num_layers, "num_heads": self.num_heads,
                "num_kv_heads": self.num_kv_heads, "vocab_size": self.vocab_size,
                "glu": self.glu}

    def num_params(self) -> int:
        return flops.parameter_count(**self._shape(), tie_embeddings=self.tie_embeddings)

    def forward_flops_per_token(self) -> float:
        return flops.forward_flops_per_token(**self._shape(), seq_len=self.seq_len)

    def training_flops_per_token(self) -> float:
        return 3.0 * self.forward_flops_per_token()
