"""The services page's quickstart, run as a reader runs it, prints what it promises."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.doc_examples import new_page_state
from tests.services_util import run_marin

pytestmark = pytest.mark.slow


def _first_bash_block(page: Path) -> str:
    return re.search(r"```bash\n(.*?)```", page.read_text(), re.DOTALL).group(1)


def test_the_quickstart_shows_the_steps_it_ran_and_their_logs(tmp_path: Path):
    block = _first_bash_block(ROOT / "docs" / "services.md")
    page = new_page_state(tmp_path)
    env = {k: v for k, v in page.env.items()
           if not k.startswith(("MARIN_LOGGER", "MARIN_KV", "MARIN_CLUSTER", "MARIN_RUN"))}
    state = {**env, "MARIN_STATE_DIR": str(tmp_path / "marin-state")}
    try:
        ran = subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
        assert ran.returncode == 0, ran.stderr
        steps = json.loads(run_marin(state, "status", "--json").stdout)
        assert len(steps) == 3 and {s["state"] for s in steps} == {"succeeded"}
        for s in steps:  # the quickstart's table, and its log lines, name every step
            assert re.search(rf"│ {re.escape(s['step'])} +│ succeeded +│", ran.stdout)
            assert f"marin.executor: step {s['step']} succeeded" in ran.stdout
    finally:
        run_marin(state, "services", "down")
