"""Language models: the shared shape config and its FLOP accounting."""

from marin.models.config import TransformerConfig

__all__ = ["TransformerConfig"]
