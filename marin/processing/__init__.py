"""Data processing steps: tokenization into a token cache."""
