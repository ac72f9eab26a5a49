"""The dashboard in a real browser (headless Chromium through Playwright) over a prefix where
a real experiment ran during the test: a BPE tokenizer, a token cache, a short training run
with a profile and two trackers (JSON and an offline W&B run), a study report, a failing
step and the step it blocks.

Screenshots are saved under the test's temporary folder (printed at the end)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin.execution import Executor, ExecutorStep, output_path_of, this_output_path
from marin.models import TransformerConfig
from marin.processing.tokenize import (
    TokenizeConfig,
    TrainTokenizerConfig,
    tokenize,
    train_tokenizer,
)
from marin.trackers import TrackerConfig
from marin.training import TrainLmConfig, train_lm
from marin.training.hyperparameters import OptimizerHyperparameters
from tests.dashboard_support import browser, invocation_records, running_dashboard, status_of
from tests.helpers.corpus import plays

pytestmark = pytest.mark.slow

VOCAB = 384
TRAIN_STEPS = 24
WANDB_ENTITY, WANDB_PROJECT = "marin-team", "dashboard"
# what a hostile writer of the prefix could put in a run's trackers.json
HOSTILE_TRACKERS = {"format": "marin.trackers", "version": 1, "trackers": [
    {"type": "<img src=x onerror=\"window.pwned=1\">", "details": {}, "failed": None},
    {"type": "wandb", "failed": None, "details": {
        "mode": "online", "entity": "javascript:alert(1)//", "project": "p", "id": "x"}}]}


@dataclass(frozen=True)
class ReportConfig:
    run_path: str
    output_path: str = this_output_path()


@dataclass(frozen=True)
class BoomConfig:
    top_k: int
    output_path: str = this_output_path()


@dataclass(frozen=True)
class AfterConfig:
    upstream: str
    output_path: str = this_output_path()


def write_report(config: ReportConfig) -> None:
    """A miniature study step: report.md, fit.json, a plot page, and a log of its own."""
    import plotly.graph_objects as go

    out = Path(config.output_path)
    out.mkdir(parents=True, exist_ok=True)
    log = logging.getLogger(f"report-{id(config)}")
    handler = logging.FileHandler(out / "study.log")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    summary = json.loads((Path(config.run_path) / "summary.json").read_text())
    log.info("read the run's summary: eval loss %.4f", summary["eval_loss"])
    (out / "fit.json").write_text(json.dumps({"runs": 1, "eval_loss": summary["eval_loss"]}))
    (out / "trackers.json").write_text(json.dumps(HOSTILE_TRACKERS))
    (out / "report.md").write_text(
        "# Tiny study\n\n| params | tokens | eval loss |\n| --- | --- | --- |\n"
        f"| {summary['params']} | {summary['tokens']} | {summary['eval_loss']:.4f} |\n\n"
        "The curve: [plot](isoflops.html)\n")
    figure = go.Figure(go.Scatter(x=[1, 2, 3], y=[3.0, 2.5, 2.7], name="loss"))
    figure.write_html(out / "isoflops.html", include_plotlyjs="cdn")
    log.info("wrote report.md and isoflops.html")
    log.removeHandler(handler)
    handler.close()


def boom(config: BoomConfig) -> None:
    raise ValueError(f"bad top_k {config.top_k}: must be positive")


def after_boom(config: AfterConfig) -> None:
    Path(config.output_path).mkdir(parents=True, exist_ok=True)


def experiment_steps(corpus: Path) -> dict[str, ExecutorStep]:
    tokenizer = ExecutorStep("tok/bpe", train_tokenizer, TrainTokenizerConfig(
        input_paths=(str(corpus / "train"),), vocab_size=VOCAB))
    cache = ExecutorStep("tok/plays", tokenize, TokenizeConfig(
        train_paths=(str(corpus / "train"),), validation_paths=(str(corpus / "validation"),),
        tokenizer=output_path_of(tokenizer), num_processes=1))
    model = TransformerConfig(hidden_dim=32, intermediate_dim=96, num_layers=2, num_heads=4,
                              num_kv_heads=2, vocab_size=VOCAB, seq_len=32)
    optimizer = OptimizerHyperparameters(learning_rate=0.01, adam_learning_rate=0.01,
                                         epsilon=1e-8, beta1=0.9, beta2=0.98,
                                         optimizer="adamh", warmup_fraction=0.1)
    train = ExecutorStep("train/tiny", train_lm, TrainLmConfig(
        cache_path=output_path_of(cache), model=model, batch_size=4, train_steps=TRAIN_STEPS,
        optimizer=optimizer, tokenizer=output_path_of(tokenizer), eval_every=8,
        checkpoint_every=12, eval_batches=2, profile_steps=(2, 3),
        trackers=[TrackerConfig("json"), TrackerConfig("wandb", project=WANDB_PROJECT,
                                                       entity=WANDB_ENTITY, mode="offline")]))
    report = ExecutorStep("study/tiny", write_report, ReportConfig(run_path=output_path_of(train)))
    failing = ExecutorStep("broken/boom", boom, BoomConfig(top_k=0))
    blocked = ExecutorStep("broken/after", after_boom,
                           AfterConfig(upstream=output_path_of(failing)))
    return {"tokenizer": tokenizer, "cache": cache, "train": train, "report": report,
            "boom": failing, "after": blocked}


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("dashboard-experiment")
    corpus = root / "corpus"
    (corpus / "train").mkdir(parents=True)
    (corpus / "validation").mkdir()
    texts = plays(4)
    for play in texts[:3]:
        shutil.copy(play, corpus / "train" / f"{play.stem}.txt")
    shutil.copy(texts[3], corpus / "validation" / f"{texts[3].stem}.txt")
    prefix = root / "prefix"
    steps = experiment_steps(corpus)
    with pytest.MonkeyPatch.context() as patch:  # W&B's settings stay in the test's folder
        patch.setenv("WANDB_CONFIG_DIR", str(root / "wandb-config"))
        patch.delenv("WANDB_API_KEY", raising=False)
        result = Executor(str(prefix), max_concurrent=2).run(list(steps.values()),
                                                             experiment=__name__)
    assert not result.ok  # broken/boom fails on purpose
    keys = {name: next(s.key for s in result.steps if s.name == step.name)
            for name, step in steps.items()}
    shots = root / "screenshots"
    shots.mkdir()
    with running_dashboard(str(prefix)) as url:
        yield {"prefix": prefix, "keys": keys, "url": url, "shots": shots}
    print(f"\ndashboard screenshots: {shots}")


@pytest.fixture(scope="module")
def page(experiment):
    with browser() as chromium:
        context = chromium.new_context(viewport={"width": 1360, "height": 900})
        yield context.new_page()
        context.close()


def test_the_graph_shows_every_steps_state_as_stored(experiment, page):
    [record] = invocation_records(experiment["prefix"])
    page.goto(experiment["url"] + "/")
    link = f"tr[data-invocation='{record['id']}'] a"
    assert record["experiment"] == __name__  # the name the entry point gave, not a guess
    assert page.inner_text(link) == __name__
    page.click(link)
    page.wait_for_selector("svg#graph g.node")
    shown = page.eval_on_selector_all(
        "svg#graph g.node", "nodes => nodes.map(n => [n.dataset.key, n.dataset.state])")
    expected = {s["key"]: status_of(experiment["prefix"] / s["key"]) for s in record["steps"]}
    assert dict(shown) == expected
    assert expected[experiment["keys"]["boom"]] == "FAILED"
    assert expected[experiment["keys"]["after"]] == "PENDING"
    assert expected[experiment["keys"]["train"]] == "SUCCESS"
    fill = "k => getComputedStyle(document.querySelector(`g.node[data-key='${k}'] rect`)).stroke"
    assert page.evaluate(fill, experiment["keys"]["boom"]) != \
        page.evaluate(fill, experiment["keys"]["train"])
    problems = page.inner_text("#problems")
    assert "bad top_k 0: must be positive" in problems
    rows = page.inner_text("#steps")
    assert "no output yet" in rows  # the plan's reason, as recorded by the executor
    page.screenshot(path=str(experiment["shots"] / "experiment.png"), full_page=True)


def test_a_steps_config_and_log_open_from_the_graph(experiment, page):
    [record] = invocation_records(experiment["prefix"])
    key = experiment["keys"]["report"]
    page.goto(f"{experiment['url']}/experiments/{record['id']}")
    page.click(f"a:has(g.node[data-key='{key}'])")
    page.wait_for_selector("#config")
    info = json.loads((experiment["prefix"] / key / ".executor_info").read_text())
    assert json.loads(page.inner_text("#config")) == info["config"]
    logs = page.inner_text("#logs")
    stored = (experiment["prefix"] / key / "study.log").read_text()
    assert stored.strip().splitlines()[-1] in logs and "read the run's summary" in logs
    assert "study.log" in page.inner_text("#files")
    page.screenshot(path=str(experiment["shots"] / "step.png"), full_page=True)

    page.goto(f"{experiment['url']}/steps/{experiment['keys']['boom']}")
    traceback = page.inner_text("#traceback")
    assert "ValueError: bad top_k 0: must be positive" in traceback
    assert "raise ValueError" in traceback


def test_the_loss_curve_has_one_point_per_metrics_record(experiment, page):
    key = experiment["keys"]["train"]
    records = [json.loads(line) for line in
               (experiment["prefix"] / key / "metrics.jsonl").read_text().splitlines()]
    page.goto(f"{experiment['url']}/runs")
    page.wait_for_selector("#chart-loss .main-svg")
    points = "([id, k]) => document.getElementById(id).data.find(t => t.name === k).x.length"
    assert page.evaluate(points, ["chart-loss", key]) == \
        sum("train/loss" in r for r in records) == TRAIN_STEPS
    assert page.evaluate(points, ["chart-eval_loss", key]) == sum("eval/loss" in r
                                                                  for r in records)
    assert page.evaluate(points, ["chart-mfu", key]) == sum("throughput/mfu" in r for r in records)
    page.screenshot(path=str(experiment["shots"] / "runs.png"), full_page=True)


def test_cache_study_and_trace_pages(experiment, page):
    cache_key = experiment["keys"]["cache"]
    ledger = json.loads((experiment["prefix"] / cache_key / "ledger.json").read_text())
    documents = sum(s["documents"] for split in ledger["splits"].values() for s in split)
    page.goto(f"{experiment['url']}/caches")
    row = page.locator(f"tr[data-cache='{cache_key}']")
    assert row.locator("[data-field=documents]").inner_text() == str(documents)
    assert int(row.locator("[data-field=shards]").inner_text()) == \
        sum(len(split) for split in ledger["splits"].values())

    study = experiment["keys"]["report"]
    page.goto(f"{experiment['url']}/studies")
    page.click(f"a:text('{study}')")
    summary = json.loads((experiment["prefix"] / experiment["keys"]["train"] /
                          "summary.json").read_text())
    assert f"{summary['eval_loss']:.4f}" in page.inner_text("#report table")
    # The plot page asked for plotly.js from a CDN; the dashboard serves its bundled copy.
    frame = page.frame_locator("iframe.plot")
    frame.locator(".plotly-graph-div .main-svg").first.wait_for(timeout=20_000)
    page.screenshot(path=str(experiment["shots"] / "study.png"), full_page=True)

    page.goto(f"{experiment['url']}/traces")
    sections = page.locator("section.trace")
    assert sections.count() == 1
    assert ".xplane.pb" in sections.first.get_attribute("data-trace")
    from marin.dashboard.pages import profiling_available

    if profiling_available():
        assert sections.first.locator("table").count() >= 1
    else:
        assert page.locator("#profiling-missing").is_visible()


def test_a_runs_trackers_link_its_wandb_run_and_show_the_sync_command(experiment, page):
    key = experiment["keys"]["train"]
    [folder] = (experiment["prefix"] / key / "wandb").glob("offline-run-*")  # W&B's own
    assert list(folder.glob("run-*.wandb"))
    run_id = key.replace("/", "-")  # one W&B run per step key
    link = f"https://wandb.ai/{WANDB_ENTITY}/{WANDB_PROJECT}/runs/{run_id}"
    page.goto(f"{experiment['url']}/steps/{key}")
    trackers = page.locator("#trackers li")
    assert trackers.evaluate_all("items => items.map(i => i.dataset.tracker)") == [
        "json", "wandb"]
    wandb = page.locator("#trackers li[data-tracker=wandb]")
    assert wandb.locator("a.wandb-link").get_attribute("href") == link
    assert wandb.locator("pre.sync-command").inner_text() == f"wandb sync {folder}"
    assert page.locator("#trackers li[data-tracker=json] code").inner_text() == str(
        experiment["prefix"] / key / "tracker.jsonl")
    page.screenshot(path=str(experiment["shots"] / "trackers.png"), full_page=True)
    page.goto(f"{experiment['url']}/runs")
    assert page.locator(f"tr[data-run='{key}'] td.trackers a.wandb-link").get_attribute(
        "href") == link


def test_a_hostile_trackers_record_is_shown_as_text(experiment, page):
    page.goto(f"{experiment['url']}/steps/{experiment['keys']['report']}")
    page.wait_for_selector("#trackers")
    assert page.locator("#trackers img").count() == 0
    assert page.evaluate("window.pwned") is None
    assert HOSTILE_TRACKERS["trackers"][0]["type"] in page.inner_text("#trackers")
    assert page.locator("#trackers a").count() == 0  # no link from a name W&B refuses


@dataclass(frozen=True)
class GateConfig:
    name: str
    output_path: str = this_output_path()


GATE = threading.Event()


def gated(config: GateConfig) -> None:
    if not GATE.wait(timeout=120):
        raise TimeoutError("the test never opened the gate")
    Path(config.output_path).mkdir(parents=True, exist_ok=True)


def test_states_update_live_while_an_executor_runs(experiment, page):
    step = ExecutorStep("live/gated", gated, GateConfig(name="live"))
    before = {r["id"] for r in invocation_records(experiment["prefix"])}
    runner = threading.Thread(target=Executor(str(experiment["prefix"])).run, args=([step],))
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while not (new := [r for r in invocation_records(experiment["prefix"])
                           if r["id"] not in before]):
            assert time.monotonic() < deadline, "the executor recorded no invocation"
            time.sleep(0.05)
        key = new[0]["steps"][0]["key"]
        while status_of(experiment["prefix"] / key) != "RUNNING":
            assert time.monotonic() < deadline, "the gated step never started"
            time.sleep(0.05)
        page.goto(f"{experiment['url']}/experiments/{new[0]['id']}")
        node = f"g.node[data-key='{key}']"
        assert page.get_attribute(node, "data-state") == "RUNNING"
        GATE.set()
        page.wait_for_function(f"document.querySelector(\"{node}\").dataset.state === "
                               "'SUCCESS'", timeout=60_000)
        assert status_of(experiment["prefix"] / key) == "SUCCESS"
    finally:
        GATE.set()
        runner.join(timeout=60)


def test_the_dashboard_wrote_nothing_under_the_prefix(experiment, page):
    from tests.conftest import snapshot

    before = snapshot(experiment["prefix"])
    for path in ("/", "/experiments/all", "/runs", "/studies", "/caches", "/traces",
                 f"/steps/{experiment['keys']['train']}"):
        page.goto(experiment["url"] + path)
    assert snapshot(experiment["prefix"]) == before
    assert os.path.isdir(experiment["prefix"])
