"""Training a byte-level BPE tokenizer as a step (Hugging Face tokenizers, offline).

    tok = ExecutorStep("tokenizers/shakespeare-8k", train_tokenizer,
                       TrainTokenizerConfig(input_paths=("data/plays/*.txt",), vocab_size=8192))
    tokenize_step("tokenized/shakespeare", ["data/plays/*.txt"], tokenizer=tok)

The output folder holds ``tokenizer.json``; ``<|endoftext|>`` is its end-of-document token.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

from marin.execution import this_output_path
from marin.processing.tokenize.documents import DecodeCounter, read_documents
from marin.processing.tokenize.encoders import GPT2_EOS
from marin.processing.tokenize.inputs import expand_inputs
from marin.storage.files import join_url, move_into_place


@dataclass(frozen=True)
class TrainTokenizerConfig:
    """Attributes:
        input_paths: training documents (same formats as tokenization).
        vocab_size: size of the vocabulary, special tokens included.
        min_frequency: merges seen fewer times are not learned.
        output_path: where tokenizer.json is written (the step's output by default).
        text_field: JSON-lines field or Parquet column with the text.
    """

    input_paths: tuple[str, ...]
    vocab_size: int = 8192
    min_frequency: int = 2
    output_path: str = this_output_path()
    text_field: str = "text"


def train_tokenizer(config: TrainTokenizerConfig) -> str:
    from tokenizers import ByteLevelBPETokenizer

    if config.vocab_size < 257:
        raise ValueError(f"TrainTokenizerConfig.vocab_size must exceed the 256 byte tokens, "
                         f"got {config.vocab_size}")
    files = expand_inputs(config.input_paths)
    counter = DecodeCounter()

    def documents():
        for path in files:
            yield from read_documents(path, counter, config.text_field)

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(documents(), vocab_size=config.vocab_size,
                                  min_frequency=config.min_frequency,
                                  special_tokens=[GPT2_EOS], show_progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, "tokenizer.json")
        tokenizer.save(local)
        destination = join_url(config.output_path, "tokenizer.json")
        move_into_place(local, destination)
    return destination
