"""Trackers on one small training run: W&B's run file, TensorBoard's event files and the
JSON tracker's lines hold what metrics.jsonl holds; a broken tracker changes nothing; a
command-line override takes bare tracker names as Python does."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marin import registry
from marin.execution import ExecutorStep, this_output_path
from marin.execution.graph import StepOrder
from marin.execution.overrides import apply_overrides
from marin.trackers import TrackerConfig
from marin.training import TrainingConfigError, train_lm
from tests.conftest import ROOT
from tests.helpers.distributions import make_distribution
from tests.helpers.training import tiny_config
from tests.helpers.wandb_records import wandb_history

pytestmark = pytest.mark.slow

# Trackers run in a process of their own: the broken one counts its calls in a file.
BROKEN = """
import os
class Broken:
    def __init__(self, config, run):
        pass
    def log(self, step, metrics):
        with open(os.environ["BROKEN_TRACKER_CALLS"], "a") as f:
            f.write("log\\n")
        raise RuntimeError("tracker server unreachable")
    def summary(self, values):
        raise RuntimeError("tracker server unreachable")
    def finish(self):
        raise RuntimeError("tracker server unreachable")
"""


@pytest.fixture(scope="module")
def runs(cache: Path, tmp_path_factory):
    """The same run twice: without trackers, and with all three plus one that raises."""
    root = tmp_path_factory.mktemp("trackers")
    site = root / "site"
    make_distribution(site, "acme-trackers",
                      {"marin.trackers": {"broken": "acme_broken_tracker:Broken"}},
                      {"acme_broken_tracker": BROKEN})
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        patch.delenv("WANDB_API_KEY", raising=False)
        patch.delenv("WANDB_MODE", raising=False)
        patch.setenv("WANDB_CONFIG_DIR", str(root / "wandb-config"))
        calls = root / "broken-calls.txt"
        patch.setenv("BROKEN_TRACKER_CALLS", str(calls))
        registry.refresh()
        plain = tiny_config(cache, root / "plain" / "train" / "tiny-0", train_steps=12,
                            eval_every=6)
        train_lm(plain)
        tracked = dataclasses.replace(
            plain, output_path=str(root / "tracked" / "train" / "tiny-0"),
            trackers=[TrackerConfig("json"), TrackerConfig("tensorboard"),
                      TrackerConfig("wandb", project="isoflop-tiny"), TrackerConfig("broken")])
        handler = _Capture()
        logging.getLogger("marin.trackers").addHandler(handler)
        try:
            train_lm(tracked)
        finally:
            logging.getLogger("marin.trackers").removeHandler(handler)
        yield {"plain": Path(plain.output_path), "tracked": Path(tracked.output_path),
               "warnings": handler.lines,
               "broken_calls": len(calls.read_text().splitlines())}
    registry.refresh()


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _metrics(run: Path) -> dict[int, dict]:
    rows: dict[int, dict] = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        rows.setdefault(record.pop("step"), {}).update(record)
    return rows


def test_the_wandb_run_file_holds_the_history_of_metrics_jsonl(runs):
    folders = list((runs["tracked"] / "wandb").glob("offline-run-*"))
    assert len(folders) == 1, folders  # an offline run folder, for `wandb sync`
    assert folders[0].name.endswith("-train-tiny-0")  # the run's id is the step's key
    history = wandb_history(next(folders[0].glob("run-*.wandb")))
    expected = _metrics(runs["tracked"])
    assert sorted(history) == sorted(expected)
    for step, values in expected.items():
        got = {k: v for k, v in history[step].items() if not k.startswith("_")}
        assert got == values, step


def test_tensorboard_reads_back_the_scalars_of_metrics_jsonl(runs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(runs["tracked"] / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    expected = _metrics(runs["tracked"])
    names = {name for values in expected.values() for name in values}
    assert names <= set(events.Tags()["scalars"])
    for name in names:
        got = {e.step: e.value for e in events.Scalars(name)}
        want = {step: v[name] for step, v in expected.items() if name in v}
        assert got.keys() == want.keys(), name
        for step, value in want.items():  # event files store float32
            assert math.isclose(got[step], value, rel_tol=1e-6, abs_tol=1e-30), (name, step)


def test_the_json_tracker_writes_levanters_layout(runs):
    lines = [json.loads(line) for line in
             (runs["tracked"] / "tracker.jsonl").read_text().splitlines()]
    assert all(line["tracker"] == "json_logger" for line in lines)
    assert lines[0]["event"] == "hparams"
    assert lines[0]["hparams"]["batch_size"] == 8 and "device_kind" in lines[0]["hparams"][
        "hardware"]
    logged: dict[int, dict] = {}
    for line in lines:
        if line["event"] == "log":
            logged.setdefault(line["step"], {}).update(line["metrics"])
    assert logged == _metrics(runs["tracked"])
    summary = next(line for line in lines if line["event"] == "summary")["metrics"]
    written = json.loads((runs["tracked"] / "summary.json").read_text())
    assert summary == written and summary["eval/loss"] == written["eval_loss"]
    assert lines[-1]["event"] == "finish"


def test_a_raising_tracker_changes_no_loss_and_is_reported_once(runs):
    assert runs["broken_calls"] == 1  # left out after its first failure
    reports = [w for w in runs["warnings"] if "'broken'" in w]
    assert len(reports) == 1 and "tracker server unreachable" in reports[0]

    def losses(run: Path) -> list:
        return [(s, r.get("train/loss"), r.get("eval/loss")) for s, r in _metrics(run).items()]

    assert losses(runs["tracked"]) == losses(runs["plain"])


def test_the_run_records_its_trackers_for_the_dashboard(runs):
    """``trackers.json``: every tracker, W&B's run id, project, mode and offline folder (the
    one on disk), and the broken tracker with its one-line failure."""
    from marin.dashboard.trackers import tracker_views
    from marin.trackers.config import TrackerRun
    from marin.trackers.record import read_record

    entries = read_record(json.loads((runs["tracked"] / "trackers.json").read_text()))
    assert [e.type for e in entries] == ["json", "tensorboard", "wandb", "broken"]
    wandb = entries[2].details
    [folder] = (runs["tracked"] / "wandb").glob("offline-run-*")
    assert wandb["id"] == TrackerRun.of(str(runs["tracked"])).run_id() == "train-tiny-0"
    assert (wandb["project"], wandb["mode"]) == ("isoflop-tiny", "offline")
    assert runs["tracked"] / wandb["run_folder"] == folder
    assert "tracker server unreachable" in entries[3].failed
    view = tracker_views(json.loads((runs["tracked"] / "trackers.json").read_text()), None,
                         str(runs["tracked"]))[2]
    assert view.folder == str(folder) and view.sync == f"wandb sync {folder}"
    assert view.link is None  # offline, with no entity: W&B's address is not known


def test_an_unknown_tracker_is_one_line_naming_the_field(cache: Path, tmp_path: Path):
    with pytest.raises(TrainingConfigError) as error:
        tiny_config(cache, tmp_path / "run", trackers=[TrackerConfig("wandbb")])
    message = str(error.value)
    assert "\n" not in message and "TrainLmConfig.trackers[0].type='wandbb'" in message
    assert "wandb" in message.split("available:")[1] and not (tmp_path / "run").exists()


@pytest.mark.parametrize("project", ["team/study", "", "x" * 129, "what?"])
def test_an_invalid_wandb_project_is_one_line(cache: Path, tmp_path: Path, project: str):
    with pytest.raises(TrainingConfigError) as error:
        tiny_config(cache, tmp_path / "run", trackers=["json", TrackerConfig("wandb",
                                                                             project=project)])
    message = str(error.value)
    assert "\n" not in message and message.startswith("TrainLmConfig.trackers[1] (wandb): ")
    assert f"project={project!r} is not a valid W&B project name" in message


def test_trackers_move_no_key(cache: Path, tmp_path: Path):
    from marin.execution.hashing import canonical_json, canonicalize

    config = tiny_config(cache, tmp_path / "run")
    with_trackers = dataclasses.replace(config, trackers=[TrackerConfig("json")])
    assert canonical_json(canonicalize(config, str)) == \
        canonical_json(canonicalize(with_trackers, str))


PROBE = """
from pathlib import Path
from marin.execution import ExecutorStep, executor_main, this_output_path
from marin.training import train_lm
from tests.helpers.training import tiny_config
steps = [ExecutorStep("train/probe", train_lm,
                      tiny_config(Path({cache!r}), Path("unused"), output_path=this_output_path()))]
if __name__ == "__main__":
    executor_main(steps)
"""


@pytest.mark.parametrize("raw, expected", [
    ('["json", "tensorboard"]', [TrackerConfig("json"), TrackerConfig("tensorboard")]),
    ('["json", {"type": "wandb", "project": "iso"}]',
     [TrackerConfig("json"), TrackerConfig("wandb", project="iso")]),
    ('[{"type": "tensorboard", "tags": ["a"]}]', [TrackerConfig("tensorboard", tags=("a",))]),
    ("[]", []),
])
def test_bare_tracker_names_work_in_command_line_overrides(cache: Path, tmp_path: Path, raw,
                                                           expected):
    step = ExecutorStep("train/probe", train_lm,
                        tiny_config(cache, Path("unused"), output_path=this_output_path()))
    [overridden] = apply_overrides(StepOrder.of([step]), {"train/probe.trackers": raw}).steps
    assert overridden.config.trackers == expected

    script = tmp_path / "probe.py"
    script.write_text(PROBE.format(cache=str(cache)))
    for command in (["-m", "marin.cli", "executor", "--dry-run", "--prefix",
                     str(tmp_path / "p"), str(script), "--train/probe.trackers", raw],
                    [str(script), "--dry-run", "--prefix", str(tmp_path / "p"),
                     f"--train/probe.trackers={raw}"]):
        out = subprocess.run([sys.executable, *command], capture_output=True, text=True,
                             cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
        assert out.returncode == 0, out.stderr


@dataclasses.dataclass(frozen=True)
class _Reporting:
    main: TrackerConfig | None = None
    by_team: dict[str, TrackerConfig] = dataclasses.field(default_factory=dict)
    pair: tuple[TrackerConfig, ...] = ()


@dataclasses.dataclass(frozen=True)
class _Report:
    reporting: _Reporting = _Reporting()


def test_a_bare_tracker_name_stands_for_its_config_wherever_one_is_declared():
    step = ExecutorStep("report/x", noop_step, _Report())
    [overridden] = apply_overrides(StepOrder.of([step]), {
        "report/x.reporting": '{"main": "wandb", "by_team": {"a": "json"}, '
                              '"pair": ["tensorboard", {"type": "json", "tags": ["t"]}]}'}).steps
    assert overridden.config.reporting == _Reporting(
        TrackerConfig("wandb"), {"a": TrackerConfig("json")},
        (TrackerConfig("tensorboard"), TrackerConfig("json", tags=("t",))))


def noop_step(config) -> None:
    pass
