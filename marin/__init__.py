"""marin: config-as-code scaling-law experiments for language models."""

__version__ = "0.1.0"
