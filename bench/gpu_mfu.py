"""MFU on one GPU: a ~1B-parameter candidate at sequence length 2048, with the gpu-h200
preset's XLA flags on and off, and the plain-JAX reference of bench_trainer.py.

    python bench/gpu_mfu.py            # on a machine with a GPU; about a minute per case

Each case runs in its own process (XLA reads its flags once, at start-up). MFU is the
project's FLOP accounting (3 x forward FLOPs per token, attention included) over the step
time, against the preset's 989.5 TFLOP/s dense bf16 peak.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASE = r"""
import json, os, sys, time
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
preset_on = {preset_on}
if preset_on:
    from marin.hardware import apply_preset, get_preset
    applied = apply_preset(get_preset("gpu-h200"))
import jax, jax.numpy as jnp, numpy as np, equinox as eqx
from marin.models import TransformerConfig
from bench_trainer import bench
c = TransformerConfig(hidden_dim=2048, intermediate_dim=8192, num_layers=16, num_heads=16,
                      num_kv_heads=16, vocab_size=50304, seq_len=2048)
ours, plain = bench(c, batch={batch}, steps=8)
flops = c.training_flops_per_token()
device = jax.devices()[0].device_kind
print(json.dumps({{"preset": preset_on, "params": c.num_params(), "device": device,
                  "marin_tok_s": ours, "plain_tok_s": plain,
                  "marin_mfu": ours * flops / 989.5e12, "plain_mfu": plain * flops / 989.5e12}}))
"""


def main() -> None:
    batch = int(os.environ.get("MARIN_GPU_BATCH", "16"))
    for preset_on in (True, False):
        script = CASE.format(root=str(ROOT), bench=str(ROOT / "bench"), preset_on=preset_on,
                             batch=batch)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        if out.returncode:
            print(f"preset {'on' if preset_on else 'off'}: failed\n{out.stderr[-3000:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"preset {'on ' if preset_on else 'off'} {r['device']}: {r['params'] / 1e9:.2f}B "
              f"params, marin {r['marin_tok_s']:,.0f} tok/s (MFU {r['marin_mfu']:.1%}), plain "
              f"JAX {r['plain_tok_s']:,.0f} tok/s (MFU {r['plain_mfu']:.1%})")


if __name__ == "__main__":
    main()
