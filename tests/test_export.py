"""`marin export hf`: a trained run loaded by transformers' LlamaForCausalLM on torch's CPU
build gives marin's logits, and its tokenizer.json marin's token ids.

One tiny training through the executor (GQA, untied, float32, checkpoints at steps 2 and 3)
feeds the end-to-end checks; the mapping of every parameter is checked on models whose
weights are all random (norms included), tied and untied, with and without GQA.
torch and transformers are in the test extra: these tests never skip.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import equinox as eqx
import haliax as hax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from safetensors import safe_open
from tokenizers import Tokenizer

from marin.export import ExportError, export_hf, export_model
from marin.export.tokenizer import gpt2_tokenizer_json
from marin.models import TransformerConfig
from marin.models.transformer import Axes, TransformerLM
from marin.processing.tokenize.encoders import load_encoder
from marin.training.checkpoint import Checkpoints
from marin.training.optimizer import build_optimizer
from marin.training.state import TrainerState
from tests.conftest import snapshot
from tests.helpers.corpus import plays
from tests.helpers.export import SMALLEST, Trained, marin_cli, one_line_error
from tests.helpers.training import VOCAB

TOLERANCE = 1e-4
TRICKY = ("Hello  world\n\n\tTabs, 'quotes', it's we'll they'd -- 12345 67.89\r\n"
          "ünïcödé café naïve 日本語 emoji 🤗 trailing spaces   ")


def restored(trained: Trained, step: int) -> TransformerLM:
    """The run's model at ``step``, restored as the trainer restores it (the reference)."""
    config = trained.config
    model = TransformerLM.init(config.model, key=jax.random.PRNGKey(config.seed))
    tx, _ = build_optimizer(config.optimizer, config.train_steps,
                            eqx.filter(model, eqx.is_inexact_array))
    state = TrainerState.init(model, tx)
    checkpoints = Checkpoints(str(trained.run / "checkpoints"), asynchronous=False)
    try:
        (model, _), _ = checkpoints.restore(step, (state.model, state.opt_state))
    finally:
        checkpoints.close()
    return model


def sequences(encoder, seq_len: int, count: int = 4) -> np.ndarray:
    """``count`` windows of real text, ``seq_len`` tokens each."""
    ids = encoder.encode_batch([plays(8)[7].read_text()])[0]
    stride = len(ids) // (count + 1)
    return np.array([ids[i * stride:i * stride + seq_len] for i in range(count)])


def marin_logits(model: TransformerLM, tokens: np.ndarray) -> np.ndarray:
    Batch = hax.Axis("batch", tokens.shape[0])
    named = hax.named(jnp.asarray(tokens, jnp.int32), (Batch, Axes(model.config).Pos))
    return np.asarray(model(named).array, dtype=np.float32)


def llama_logits(folder: Path, tokens: np.ndarray) -> np.ndarray:
    llama = transformers.LlamaForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    llama.eval()
    with torch.no_grad():
        return llama(torch.tensor(tokens, dtype=torch.long)).logits.numpy()


@pytest.mark.slow  # real `marin` processes
def test_the_cli_export_gives_marins_logits_at_every_position(trained: Trained, tmp_path):
    out = tmp_path / "export"
    out.mkdir()
    (out / "notes.txt").write_text("an earlier export")
    run_before = snapshot(trained.run)
    refused = one_line_error(marin_cli("export", "hf", str(trained.run), str(out)))
    assert "exists and is not empty" in refused and "--force" in refused
    assert [p.name for p in out.iterdir()] == ["notes.txt"]

    done = marin_cli("export", "hf", str(trained.run), str(out), "--force")
    assert done.returncode == 0, done.stderr
    assert "at step 3" in done.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # nothing left beside
    assert snapshot(trained.run) == run_before  # the run is only read
    umask = os.umask(0o022)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask  # not the private scratch mode

    encoder = load_encoder(trained.config.tokenizer)
    tokens = sequences(encoder, trained.config.model.seq_len)
    assert tokens.shape == (4, 16)
    expected = marin_logits(restored(trained, 3), tokens)
    got = llama_logits(out, tokens)
    assert got.shape == expected.shape == (4, 16, VOCAB)
    assert np.abs(got - expected).max() <= TOLERANCE
    # the comparison can tell checkpoints apart: step 2's logits are far from step 3's
    assert np.abs(marin_logits(restored(trained, 2), tokens) - got).max() > 100 * TOLERANCE
    with safe_open(str(out / "model.safetensors"), "np") as f:
        assert f.metadata()["marin_step"] == "3"
        assert "lm_head.weight" in set(f.keys())  # untied
    config = json.loads((out / "config.json").read_text())
    assert (config["num_key_value_heads"], config["num_attention_heads"]) == (2, 4)
    assert config["tie_word_embeddings"] is False
    assert config["eos_token_id"] == encoder.eos_id


def test_step_exports_that_committed_checkpoint(trained: Trained, tmp_path):
    export = export_hf(str(trained.run), str(tmp_path / "step2"), step=2)
    assert export.step == 2
    tokens = sequences(load_encoder(trained.config.tokenizer), 16)
    got = llama_logits(tmp_path / "step2", tokens)
    assert np.abs(got - marin_logits(restored(trained, 2), tokens)).max() <= TOLERANCE


def randomized(config: TransformerConfig, seed: int) -> TransformerLM:
    """A model whose every parameter is random: the norms' scales too (at initialisation
    they are all ones, which would hide a misplaced norm), and the embeddings at a standard
    deviation of 1, so that logits are of order one and a misplaced weight shows. Drawn with
    numpy into the model's structure (``eval_shape``): nothing is compiled."""
    shapes = jax.eval_shape(lambda: TransformerLM.init(config, key=jax.random.PRNGKey(0)))
    rng = np.random.default_rng(seed)

    def draw(leaf: hax.NamedArray) -> hax.NamedArray:
        names, shape = set(leaf.shape), leaf.array.shape
        if "vocab" in names:
            array = rng.normal(size=shape)
        elif names <= {"layers", "embed"}:  # a norm's scale
            array = 1.0 + 0.5 * rng.normal(size=shape)
        else:  # a matrix (widths of 32 to 64 here: activations stay of order one)
            array = 0.2 * rng.normal(size=shape)
        return hax.named(jnp.asarray(array, jnp.float32), leaf.axes)

    return jax.tree.map(draw, shapes, is_leaf=lambda x: isinstance(x, hax.NamedArray))


@pytest.mark.parametrize("tied, kv_heads, rope_theta, tokenizer", [
    (False, 2, 10000.0, "bpe"),    # GQA, untied
    (True, 2, 500.0, "gpt2"),      # GQA, tied, another rotary base, GPT-2's vocabulary
    (True, 4, 10000.0, "bpe"),     # plain multi-head attention, tied
    (False, 1, 10000.0, "bpe"),    # one key/value head for all queries
])
def test_every_parameter_lands_where_llama_reads_it(cache: Path, tmp_path, tied, kv_heads,
                                                    rope_theta, tokenizer):
    encoder = load_encoder("gpt2" if tokenizer == "gpt2" else str(cache / "tokenizer"))
    config = TransformerConfig(hidden_dim=32, intermediate_dim=48, num_layers=2, num_heads=4,
                               num_kv_heads=kv_heads, vocab_size=encoder.vocab_size,
                               seq_len=24, tie_embeddings=tied, rope_theta=rope_theta)
    model = randomized(config, seed=kv_heads + 7 * tied)
    export_model(model, encoder, str(tmp_path / "out"))
    with safe_open(str(tmp_path / "out" / "model.safetensors"), "np") as f:
        assert ("lm_head.weight" in set(f.keys())) is not tied
    tokens = sequences(encoder, config.seq_len)
    expected, got = marin_logits(model, tokens), llama_logits(tmp_path / "out", tokens)
    assert np.abs(expected).std() > 1.0  # logits far from zero: a misplaced weight shows
    assert np.abs(got - expected).max() <= TOLERANCE


def test_the_exported_bpe_tokenizer_gives_marins_ids(cache: Path, tmp_path):
    encoder = load_encoder(str(cache / "tokenizer"))
    export_model(randomized(SMALLEST, 0), encoder, str(tmp_path / "out"))
    texts = [plays(8)[7].read_text()[:20000], TRICKY]
    expected = encoder.encode_batch(texts)
    fast = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "out"))
    assert [fast(t).input_ids for t in texts] == expected
    plain = Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    assert [e.ids for e in plain.encode_batch(texts)] == expected
    assert fast.eos_token_id == encoder.eos_id
    assert fast.decode(expected[1]) == TRICKY


def test_gpt2s_tokenizer_json_built_offline_gives_marins_ids():
    encoder = load_encoder("gpt2")
    tokenizer = Tokenizer.from_str(gpt2_tokenizer_json())
    texts = [p.read_text() for p in plays(3)] + [TRICKY]
    expected = encoder.encode_batch(texts)
    assert sum(map(len, expected)) > 10000
    assert [e.ids for e in tokenizer.encode_batch(texts)] == expected
    assert tokenizer.get_vocab_size() == encoder.vocab_size == 50257
    assert tokenizer.token_to_id("<|endoftext|>") == encoder.eos_id == 50256
    assert tokenizer.decode(expected[-1]) == TRICKY


def copy_run(trained: Trained, to: Path, edit=None, checkpoints: bool = False) -> Path:
    """The run's recorded config (and checkpoints) in another folder, maybe edited."""
    to.mkdir()
    info = json.loads((trained.run / ".executor_info").read_text())
    if edit is not None:
        edit(info["config"])
    (to / ".executor_info").write_text(json.dumps(info))
    if checkpoints:
        shutil.copytree(trained.run / "checkpoints", to / "checkpoints")
    return to


def test_a_run_with_no_committed_checkpoint_is_refused(trained: Trained, tmp_path):
    run = copy_run(trained, tmp_path / "run")
    line = one_line_error(marin_cli("export", "hf", str(run), str(tmp_path / "out")))
    assert "no committed checkpoint" in line and "checkpoint_every" in line
    assert os.listdir(run) == [".executor_info"]  # no checkpoints folder made
    assert not (tmp_path / "out").exists()


def test_a_step_with_no_checkpoint_is_refused_listing_those_that_exist(trained: Trained,
                                                                       tmp_path):
    line = one_line_error(marin_cli("export", "hf", str(trained.run), str(tmp_path / "out"),
                                    "--step", "7"))
    assert "no committed checkpoint at step 7; it has 2, 3" in line and "--step" in line
    assert not (tmp_path / "out").exists()


def test_a_gelu_mlp_is_refused_naming_the_field(trained: Trained, tmp_path):
    run = copy_run(trained, tmp_path / "run", lambda c: c["model"].update(glu=False),
                   checkpoints=True)
    line = one_line_error(marin_cli("export", "hf", str(run), str(tmp_path / "out")))
    assert "TransformerConfig.glu=False" in line and "SwiGLU" in line
    assert not (tmp_path / "out").exists()
    with pytest.raises(ExportError, match="glu=False"):
        export_model(randomized(dataclasses.replace(trained.config.model, glu=False), 0),
                     load_encoder(trained.config.tokenizer), str(tmp_path / "out"))


def test_a_folder_that_is_no_training_output_is_refused(trained: Trained, tmp_path):
    line = one_line_error(marin_cli("export", "hf", str(tmp_path), str(tmp_path / "out")))
    assert "has no .executor_info" in line
    other = copy_run(trained, tmp_path / "other", lambda c: c.pop("model"))
    line = one_line_error(marin_cli("export", "hf", str(other), str(tmp_path / "out2")))
    assert "config has no 'model'" in line


def test_the_tokenizer_comes_from_the_cache_when_the_config_names_none(trained: Trained,
                                                                      tmp_path):
    run = copy_run(trained, tmp_path / "run", lambda c: c.update(tokenizer=None),
                   checkpoints=True)
    export_hf(str(run), str(tmp_path / "out"))
    exported = Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    encoder = load_encoder(trained.config.tokenizer)  # the one the cache's ledger names
    assert exported.encode(TRICKY).ids == encoder.encode_batch([TRICKY])[0]


def test_a_tokenizer_that_is_not_the_models_is_refused(trained: Trained, tmp_path):
    changed = tmp_path / "tokenizer"
    shutil.copytree(trained.config.tokenizer, changed)
    body = json.loads((changed / "tokenizer.json").read_text())
    (changed / "tokenizer.json").write_text(json.dumps(body))  # the same tokens, other bytes
    run = copy_run(trained, tmp_path / "run", lambda c: c.update(tokenizer=str(changed)),
                   checkpoints=True)
    with pytest.raises(ExportError, match="has changed since the run's token cache"):
        export_hf(str(run), str(tmp_path / "out"))
    line = one_line_error(marin_cli("export", "hf", str(trained.run), str(tmp_path / "out"),
                                    "--tokenizer", "gpt2"))
    assert "50257 tokens, more than TransformerConfig.vocab_size=512" in line
    assert not (tmp_path / "out").exists()


def test_a_write_cut_short_leaves_no_export_and_keeps_the_old_one(cache: Path, tmp_path,
                                                                  monkeypatch):
    import safetensors.numpy

    encoder = load_encoder(str(cache / "tokenizer"))
    model = randomized(SMALLEST, 0)
    export_model(model, encoder, str(tmp_path / "out"))
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}

    def disk_full(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"\0" * 100)  # a partial file, then the failure
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(safetensors.numpy, "save_file", disk_full)
    for out in ("out", "fresh"):
        with pytest.raises(OSError, match="No space left"):
            export_model(randomized(SMALLEST, 1), encoder, str(tmp_path / out),
                         force=True)
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no partial folder left
