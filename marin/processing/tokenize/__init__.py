"""Tokenization into a persistent, resumable token cache.

    from marin.processing.tokenize import read_cache_stats, tokenize_step
    step = tokenize_step("tokenized/shakespeare", ["data/plays/*.txt"], tokenizer="gpt2")
    stats = read_cache_stats("local_store/tokenized/shakespeare-1a2b3c4d")

Submodules: ``step`` (the step), ``ranges`` (units of work below the file), ``pool`` (the
worker threads), ``shard`` (one unit to one shard), ``documents`` and ``streams`` (reading
inputs), ``inputs`` and ``fingerprint`` (listing inputs, their content fingerprints),
``records`` and ``ledger`` (the cache's ledger), ``progress``, ``cache_stats`` (figures and
reuse of caches), ``loader`` (training batches), ``tokenizer_training`` (a byte-level BPE
step), ``encoders`` (gpt2 and tokenizer.json).
Names are imported on first use, so importing the package stays light.
"""

from __future__ import annotations

from marin._lazy import lazy_exports

_EXPORTS = {
    "TokenizeConfig": "marin.processing.tokenize.step",
    "tokenize": "marin.processing.tokenize.step",
    "tokenize_step": "marin.processing.tokenize.step",
    "TrainTokenizerConfig": "marin.processing.tokenize.tokenizer_training",
    "train_tokenizer": "marin.processing.tokenize.tokenizer_training",
    "TokenizedCacheStats": "marin.processing.tokenize.cache_stats",
    "read_cache_stats": "marin.processing.tokenize.cache_stats",
    "find_caches": "marin.processing.tokenize.cache_stats",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
