"""``marin.models.jax_compat.SHIMS`` tells the truth about the running JAX: its release is
listed, and it lacks exactly the names listed for that release (what the shims then add;
tests/test_training.py checks that haliax works with them)."""

from __future__ import annotations

import json
import subprocess
import sys

from marin.models.jax_compat import SHIMS

# Run without marin imported: which of the shimmed names this jax has of its own.
PROBE = """
import importlib, json, warnings
warnings.simplefilter("ignore")
import jax
names = json.loads({names!r})
found = {{}}
for name in names:
    module, _, attr = name.rpartition(".")
    found[name] = hasattr(importlib.import_module(module), attr)
print(json.dumps({{"version": jax.__version__, "found": found}}))
"""


def test_the_running_jax_lacks_exactly_what_its_release_is_documented_to_lack():
    names = sorted({name for shims in SHIMS.values() for name in shims})
    out = subprocess.run([sys.executable, "-c", PROBE.format(names=json.dumps(names))],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    probe = json.loads(out.stdout)
    release = ".".join(probe["version"].split(".")[:2])
    assert release in SHIMS, (f"jax {probe['version']} is not in jax_compat.SHIMS: test it "
                              f"and say which shims it needs")
    missing = tuple(name for name in names if not probe["found"][name])
    assert missing == SHIMS[release]

