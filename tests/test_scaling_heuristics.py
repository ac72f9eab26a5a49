"""The CompletedAdamh heuristic: the seed's snippet, its rules and its refusals."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from marin.hardware import get_preset
from marin.scaling_laws.candidates import NoCandidateError
from marin.scaling_laws.isoflop_analysis import DEFAULT_BUDGETS
from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic
from tests.conftest import ROOT


def test_the_seed_snippet_gives_sensible_candidates():
    heuristic = CompletedAdamhHeuristic(vocab_size=50257)
    assert DEFAULT_BUDGETS[3] == 3e19
    candidates = list(heuristic.candidates_for_budget(DEFAULT_BUDGETS[3]))
    assert len(candidates) >= 5
    for cfg in candidates:
        m = cfg.model_config
        # 3e19 is above large_step_budget (2e19): widths from 512 to 8192 in steps of 256,
        # 128-wide heads, a SwiGLU four times as wide
        assert 512 <= m.hidden_dim <= 8192 and m.hidden_dim % 256 == 0
        assert (m.vocab_size, m.head_dim, m.num_heads * 128) == (50257, 128, m.hidden_dim)
        assert m.intermediate_dim == 4 * m.hidden_dim and m.glu
        assert abs(cfg.flops - 3e19) <= 0.01 * 3e19
        assert cfg.flops == pytest.approx(cfg.tokens * m.training_flops_per_token())
        assert cfg.tokens == cfg.batch_size * cfg.train_steps * cfg.seq_len
        assert cfg.batch_size & (cfg.batch_size - 1) == 0  # a power of two
        assert 1 <= cfg.tokens_per_param <= 250
        # no hardware preset by default: no memory filter, no device-hour estimate
        assert cfg.hardware is None and cfg.estimated_device_hours is None
        assert cfg.microbatch_size == cfg.batch_size // cfg.devices
    params = [c.params for c in candidates]
    assert params == sorted(params) and params[-1] / params[0] > 5  # a real IsoFLOP span


def test_a_hardware_preset_filters_by_memory_and_estimates_device_hours():
    heuristic = CompletedAdamhHeuristic(vocab_size=50257, hardware="gpu-h100")
    candidates = list(heuristic.candidates_for_budget(3e19))
    unfiltered = list(CompletedAdamhHeuristic(vocab_size=50257).candidates_for_budget(3e19))
    memory = get_preset("gpu-h100").memory_bytes
    assert [c.params for c in candidates] == [c.params for c in unfiltered
                                              if c.estimated_memory_per_device <= memory]
    for cfg in candidates:
        assert cfg.hardware == "gpu-h100" and cfg.estimated_memory_per_device <= memory
        assert cfg.estimated_device_hours == pytest.approx(
            cfg.flops / (get_preset("gpu-h100").peak_bf16_flops * 0.4) / 3600)


CORE_ALONE = """
import json
from importlib import metadata
# A core-only install, without the first-party plugins: discovery sees the marin
# distribution alone (installing core by itself in a fresh environment cannot be done here).
every = metadata.distributions
metadata.distributions = lambda **kw: [d for d in every(**kw) if d.metadata["Name"] == "marin"]
from marin import registry
from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic
try:
    registry.load("hardware", "gpu-h100")
    plugin = True
except registry.PluginError:
    plugin = False
found = list(CompletedAdamhHeuristic(vocab_size=50257).candidates_for_budget(3e19))
print(json.dumps({"gpu_plugin": plugin, "candidates": len(found),
                  "hidden": [c.model_config.hidden_dim for c in found]}))
"""


def test_the_default_heuristic_works_with_core_alone():
    out = subprocess.run([sys.executable, "-c", CORE_ALONE], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["gpu_plugin"] is False  # the plugin is really out of reach
    with_plugins = list(CompletedAdamhHeuristic(vocab_size=50257).candidates_for_budget(3e19))
    assert result["hidden"] == [c.model_config.hidden_dim for c in with_plugins]
    assert result["candidates"] >= 5


def test_depth_rule_matches_marins():
    h = CompletedAdamhHeuristic()
    assert [h.num_layers_for(x) for x in (512, 1024, 2048, 4096)] == [6, 11, 21, 40]


def test_hyperparameters_at_the_reference_point_are_the_base_values():
    h = CompletedAdamhHeuristic()
    opt = h.optimizer_for(h.reference_batch_size, h.reference_tokens)
    assert opt.learning_rate == pytest.approx(h.lr_base)
    assert opt.adam_learning_rate == pytest.approx(h.adam_lr_base)
    assert opt.epsilon == pytest.approx(h.epsilon_base)
    assert opt.beta2 == pytest.approx(h.beta2_base)


def test_hyperparameters_scale_with_batch_and_tokens_as_documented():
    h = CompletedAdamhHeuristic()
    b0, t0 = h.reference_batch_size, h.reference_tokens
    double_batch = h.optimizer_for(4 * b0, t0)
    assert double_batch.learning_rate == pytest.approx(2 * h.lr_base)  # sqrt(4)
    assert double_batch.adam_learning_rate == pytest.approx(2 * h.adam_lr_base)
    assert double_batch.epsilon == pytest.approx(h.epsilon_base / 2)
    assert double_batch.beta2 == pytest.approx(max(0.9, h.beta2_base**4))
    longer = h.optimizer_for(b0, 10 * t0)
    assert longer.learning_rate == pytest.approx(h.lr_base * 10**-0.3)
    assert h.optimizer_for(b0 * 100000, t0).beta2 == 0.9  # clipped


def test_candidates_for_every_default_budget():
    h = CompletedAdamhHeuristic(vocab_size=50257)
    for budget in DEFAULT_BUDGETS:
        assert list(h.candidates_for_budget(budget)), budget


@pytest.mark.parametrize("budget", [0, -1e19, math.nan, math.inf])
def test_a_budget_at_or_below_zero_is_refused(budget):
    with pytest.raises(ValueError, match="budget must be a positive number of FLOPs"):
        list(CompletedAdamhHeuristic().candidates_for_budget(budget))


def test_a_budget_too_small_names_the_smallest_that_works():
    h = CompletedAdamhHeuristic(vocab_size=50257)
    with pytest.raises(NoCandidateError) as info:
        h.candidates_or_explain(1e12)
    message = str(info.value)
    assert "no candidate fits a budget of 1e+12 FLOPs" in message
    smallest = float(message.rsplit("about ", 1)[1].split(" ")[0])
    assert list(h.candidates_for_budget(smallest * 1.01)) or list(
        h.candidates_for_budget(smallest))
    assert not list(h.candidates_for_budget(smallest / 1.2))


def test_a_small_accelerator_removes_candidates_that_do_not_fit():
    big = list(CompletedAdamhHeuristic(hardware="gpu-h200", devices=1).candidates_for_budget(
        1e20))
    small = list(CompletedAdamhHeuristic(hardware="tpu-v5e", devices=1).candidates_for_budget(
        1e20))
    assert len(small) < len(big)
    assert all(c.estimated_memory_per_device <= 16 * 2**30 for c in small)


def test_proportional_depth_grows_layers_with_width_and_keeps_the_parents_rules():
    from marin.scaling_laws.scaling_heuristics import ProportionalDepthHeuristic

    settings = dict(vocab_size=384, seq_len=64, hardware="cpu", devices=1, min_hidden=8,
                    max_hidden=64, hidden_step=8, head_dim=8, target_steps=10**9,
                    min_batch_size=16, max_batch_size=16, min_train_steps=10,
                    budget_tolerance=0.05, min_tokens_per_param=1,
                    max_tokens_per_param=1000)
    deep = ProportionalDepthHeuristic(hidden_per_layer=16, **settings)
    assert [deep.num_layers_for(h) for h in (8, 16, 32, 48, 64)] == [1, 1, 2, 3, 4]
    flat = CompletedAdamhHeuristic(**settings)
    assert [flat.num_layers_for(h) for h in (8, 16, 32, 48, 64)] == [1] * 5
    candidates = list(deep.candidates_for_budget(1e11))
    assert [c.model_config.num_layers for c in candidates] == \
        [deep.num_layers_for(c.model_config.hidden_dim) for c in candidates]
    assert max(c.model_config.num_layers for c in candidates) > 1
    for c in candidates:  # the parent's batch, step and budget rules, on the deeper model
        assert c.batch_size == 16
        assert c.tokens == c.batch_size * c.train_steps * c.seq_len
        assert abs(c.flops - 1e11) <= 0.05 * 1e11
        assert c.params == c.model_config.num_params()
    with pytest.raises(ValueError, match="hidden_per_layer"):
        ProportionalDepthHeuristic(hidden_per_layer=0, **settings)


def test_candidates_keep_only_batches_their_devices_can_split():
    from marin.scaling_laws import CompletedAdamHHeuristic
    from marin.training.config import check_batch_layout

    wide = CompletedAdamHHeuristic(devices=16)
    candidates = [c for budget in (1e18, 3e18) for c in wide.candidates_for_budget(budget)]
    assert candidates and all(c.batch_size % 16 == 0 for c in candidates)
    for c in candidates:
        check_batch_layout(c.batch_size, 16, c.microbatch_size)
    narrow = [c for budget in (1e18, 3e18)
              for c in CompletedAdamHHeuristic(devices=1).candidates_for_budget(budget)]
    assert any(c.batch_size % 16 for c in narrow)  # what the 16 devices had to leave out
