"""Compile once: the compile time of a run whose learning rate and length changed, against
the same run's first compile in a fresh JAX persistent cache.

    python bench/bench_compile.py [--hidden 256 --layers 4 --steps 6]

Each run is a fresh process (as a rerun of a study is), training the same model on a token
cache of Shakespeare's plays (a BPE of 512 tokens); the second one changes the learning
rates, weight decay, warmup and number of steps, which enter the update as inputs. A run's
compile time is what JAX reports for tracing, lowering and compiling
(``/jax/core/compile/*``) plus reading programs from the cache; the figure is the second
run's over the first's, with how many programs each compiled and read.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RUN = """
import dataclasses, json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
import jax
from marin.models import TransformerConfig
from marin.training import train_lm
from marin.training.compilation import CacheEvents
from tests.helpers.training import tiny_config
seconds = {{"compile": 0.0, "read": 0.0}}
def listen(event, duration, **_):
    if event.startswith("/jax/core/compile/"):
        seconds["compile"] += duration
    elif event == "/jax/compilation_cache/cache_retrieval_time_sec":
        seconds["read"] += duration
jax.monitoring.register_event_duration_secs_listener(listen)
args = json.loads({args!r})
model = TransformerConfig(hidden_dim=args["hidden"], intermediate_dim=3 * args["hidden"],
                          num_layers=args["layers"], num_heads=4, num_kv_heads=2,
                          vocab_size=512, seq_len=128)
config = tiny_config(Path({data!r}), Path({out!r}), model=model, train_steps=args["steps"],
                     eval_every=0, compilation_cache={cache!r})
config = dataclasses.replace(config, optimizer=dataclasses.replace(
    config.optimizer, **args["optimizer"]))
started = time.perf_counter()
with CacheEvents() as events:
    train_lm(config)
print(json.dumps({{**seconds, "wall": time.perf_counter() - started, "hits": events.hits,
                   "misses": events.misses}}))
"""


def run(data: Path, out: Path, cache: Path, args: dict) -> dict:
    script = RUN.format(root=str(ROOT), data=str(data), out=str(out), cache=str(cache),
                        args=json.dumps(args))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.helpers.training import build_cache

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["MARIN_CACHE_DIR"] = str(root / "marin-cache")
        (root / "data").mkdir()
        data = build_cache(root / "data")
        shape = {"hidden": options.hidden, "layers": options.layers}
        first = run(data, root / "first", root / "jax-cache",
                    {**shape, "steps": options.steps, "optimizer": {}})
        second = run(data, root / "second", root / "jax-cache",
                     {**shape, "steps": options.steps + 4,
                      "optimizer": {"learning_rate": 0.003, "adam_learning_rate": 0.002,
                                    "weight_decay": 0.1, "warmup_fraction": 0.25}})
    for name, figures in (("first run, fresh cache", first), ("second run, new lr", second)):
        print(f"{name}: compile {figures['compile']:.2f} s + cache reads "
              f"{figures['read']:.2f} s, {figures['misses']} programs compiled, "
              f"{figures['hits']} read; run {figures['wall']:.1f} s")
    ratio = (second["compile"] + second["read"]) / (first["compile"] + first["read"])
    print(f"compile time, second run / first: {ratio:.2f}")


if __name__ == "__main__":
    main()
