"""Large step outputs cost the dashboard a bounded read and a bounded page: a metrics file
larger than the read budget, a long log, a file too large to serve, and more runs than the
charts show."""

from __future__ import annotations

import json

import pytest

from tests.dashboard_support import get, run_file_steps, running_dashboard

RECORDS = 400_000  # about 3x the read budget


def _loss(step: int) -> float:
    return round(10.0 / (1 + step / 1000), 6)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> dict[str, object]:
    prefix = tmp_path_factory.mktemp("limits") / "prefix"
    keys = run_file_steps(prefix, {"train/big": {"metrics.jsonl": ""},
                                   "train/log": {"train.log": ""}})
    metrics = prefix / keys["train/big"] / "metrics.jsonl"
    pad = "x" * 20
    with metrics.open("w") as f:
        for step in range(RECORDS):
            record = {"step": step, "loss": _loss(step), "pad": pad}
            if step % 1000 == 0:
                record["eval_loss"] = _loss(step) + 1
            f.write(json.dumps(record) + "\n")
    log = prefix / keys["train/log"] / "train.log"
    with log.open("w") as f:
        for i in range(300_000):
            f.write(f"line {i} of the training log\n")
    with (prefix / keys["train/log"] / "huge.bin").open("wb") as f:
        f.truncate(65 << 20)  # sparse: no disk used
    return {"prefix": prefix, "keys": keys, "metrics": metrics, "log": log}


def test_a_metrics_file_larger_than_the_budget_is_read_in_windows(big):
    from marin.dashboard.bounded import read_spread
    from marin.dashboard.metrics import BUDGET

    size = big["metrics"].stat().st_size
    assert size > 2 * BUDGET
    parts = read_spread(str(big["metrics"]), BUDGET)
    assert sum(len(p.data) for p in parts) <= BUDGET
    assert parts[0].offset == 0 and parts[-1].offset + len(parts[-1].data) == size


def test_api_metrics_is_bounded_and_says_it_sampled(big):
    key = big["keys"]["train/big"]
    with running_dashboard(str(big["prefix"])) as url:
        status, body, _ = get(f"{url}/api/metrics?run={key}")
    assert status == 200 and len(body) < 400_000
    from marin.dashboard.metrics import MAX_POINTS

    run = json.loads(body)["runs"][key]
    assert "metrics.jsonl is" in run["note"] and "MB" in run["note"]
    steps, losses = run["series"]["loss"]
    assert 100 < len(steps) <= MAX_POINTS
    assert steps == sorted(steps) and steps[0] == 0 and steps[-1] == RECORDS - 1
    assert all(loss == _loss(step) for step, loss in zip(steps, losses, strict=True))
    assert run["last"] == {"step": RECORDS - 1, "loss": _loss(RECORDS - 1)}
    eval_steps = run["series"]["eval_loss"][0]
    assert eval_steps and all(s % 1000 == 0 for s in eval_steps)


def test_the_runs_page_is_bounded(big):
    key = big["keys"]["train/big"]
    with running_dashboard(str(big["prefix"])) as url:
        status, body, _ = get(f"{url}/runs?run={key}")
    assert status == 200 and len(body) < 1_000_000
    assert f'data-note="{key}"' in body


def test_asking_for_more_runs_than_the_charts_show_is_refused_in_one_line(big):
    from marin.dashboard.pages import RUN_LIMIT

    key = big["keys"]["train/big"]
    many = "&".join(f"run={key[:-9]}{i}-{key[-8:]}" for i in range(RUN_LIMIT + 1))
    with running_dashboard(str(big["prefix"])) as url:
        status, body, _ = get(f"{url}/api/metrics?{many}")
    assert status == 400 and f"at most {RUN_LIMIT}" in json.loads(body)["error"]


def test_a_long_log_shows_its_end_and_a_huge_file_is_not_served(big):
    key = big["keys"]["train/log"]
    last = big["log"].read_text().splitlines()[-1]
    with running_dashboard(str(big["prefix"])) as url:
        status, page, _ = get(f"{url}/steps/{key}")
        huge = get(f"{url}/file?step={key}&path=huge.bin")
    assert status == 200 and last in page and len(page) < 500_000
    assert "line 0 of the training log" not in page and "last 64 kB" in page
    assert huge[0] == 413 and "68 MB" in huge[1] and "copy it from" in huge[1]
