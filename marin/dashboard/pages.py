"""What each page shows: plain functions from a ``PrefixReader`` to a template's context.

    context = experiment_page(reader, "20250101-120000-1a2b3c4d", state=None, show_all=False)
    context["counts"]        # {"SUCCESS": 3, "RUNNING": 1}

They run in worker threads (they block on storage) and raise ``DashboardError`` for what
the page must explain: an unknown step, an empty prefix, an unreadable record.
"""

from __future__ import annotations

import importlib.util
import json
import math
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

from marin.dashboard.layout import NODE_H, NODE_W, layout_graph
from marin.dashboard.outputs import (
    IMAGE_TYPES,
    OutputIndex,
    is_text,
    live_folder,
    log_files,
    read_json_files,
    read_metrics,
    read_text_tail,
)
from marin.dashboard.reader import (
    DashboardError,
    PrefixReader,
    StepView,
    safe_subpath,
    step_key_of,
)

STATES = ("FAILED", "STOPPED", "CORRUPT", "RUNNING", "CANCELLED", "PENDING", "SUCCESS")
METRICS = (("loss", "training loss"), ("eval_loss", "eval loss"),
           ("eval_bpb", "eval bits per byte"), ("learning_rate", "learning rate"),
           ("tokens_per_s", "tokens / s"), ("mfu", "MFU"))
GRAPH_LIMIT = 300
ROW_LIMIT = 500
RUN_LIMIT = 12


# -- formatting (also template globals) ---------------------------------------------------

def fmt_time(epoch: float | None) -> str:
    if not epoch:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def fmt_num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    for size, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= size:
            return f"{value / size:.3g}{suffix}"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"


def profiling_available() -> bool:
    try:
        return importlib.util.find_spec("marin.profiling") is not None
    except (ImportError, ValueError):
        return False


# -- scope -------------------------------------------------------------------------------

def _index(reader: PrefixReader) -> OutputIndex:
    index = reader.__dict__.get("_output_index")
    if index is None:
        index = reader.__dict__["_output_index"] = OutputIndex(reader)
    return index


def _scope(reader: PrefixReader, exp: str | None
           ) -> tuple[list[str], dict[str, dict[str, Any]], dict[str, Any] | None]:
    """Step keys, plan entries by key, and the invocation record for ``exp`` (all steps
    under the prefix when ``exp`` is empty or ``all``)."""
    if exp and exp != "all":
        record = reader.invocation(exp)
        steps = [s for s in record.get("steps", []) if isinstance(s, dict) and "key" in s]
        return [s["key"] for s in steps], {s["key"]: s for s in steps}, record
    return reader.discover_steps(), {}, None


def _counts(states: list[StepView]) -> dict[str, int]:
    counts = Counter(s.state for s in states)
    return {state: counts[state] for state in STATES if counts[state]}


# -- experiments -------------------------------------------------------------------------

def experiments_page(reader: PrefixReader) -> dict[str, Any]:
    invocations = reader.invocations()
    keys = reader.discover_steps()
    states = reader.step_states(keys, with_info=False)
    rows = []
    live = {s.key: s.state for s in states}
    for inv in invocations:
        steps = inv.get("steps", [])
        current = Counter(live.get(s.get("key"), "PENDING") for s in steps
                          if isinstance(s, dict))
        running = current.get("RUNNING", 0)
        if inv.get("error"):
            status = "unreadable"
        elif inv.get("ended"):
            status = "finished"
        else:
            status = "running" if running else "stopped (no end recorded)"
        rows.append({"id": inv.get("id"), "experiment": inv.get("experiment", "?"),
                     "user": inv.get("user"), "host": inv.get("host"),
                     "git_commit": (inv.get("git_commit") or "")[:10],
                     "started": inv.get("started"), "ended": inv.get("ended"),
                     "duration": (inv["ended"] - inv["started"]) if inv.get("ended")
                     and inv.get("started") else None,
                     "steps": len(steps), "status": status, "error": inv.get("error"),
                     "outcomes": inv.get("counts") or {},
                     "current": {s: current[s] for s in STATES if current.get(s)}})
    empty = None
    if not invocations and not keys:
        empty = (f"{reader.prefix} holds no executor outputs yet. Run an experiment with "
                 f"--prefix {reader.prefix} (or MARIN_PREFIX), then reload."
                 if reader.exists() else
                 f"{reader.prefix} does not exist (or is empty). Check the path; an executor "
                 "creates it on its first run.")
    return {"invocations": rows, "all_count": len(keys), "all_counts": _counts(states),
            "empty": empty, "title": "Experiments"}


def experiment_page(reader: PrefixReader, inv: str, state: str | None,
                    show_all: bool) -> dict[str, Any]:
    keys, planned, record = _scope(reader, inv)
    states = reader.step_states(keys, planned)
    counts = _counts(states)
    problems = [s for s in states if s.state in ("FAILED", "STOPPED", "CORRUPT")
                or s.info_error][:50]
    graph = None
    if len(states) <= GRAPH_LIMIT:
        placed = layout_graph([(s.key, s.dependencies) for s in states])
        graph = {"layout": placed, "by_key": {s.key: s for s in states},
                 "node_w": NODE_W, "node_h": NODE_H}
    families: dict[str, Counter] = {}
    for s in states:
        families.setdefault(s.family, Counter())[s.state] += 1
    shown = [s for s in states if not state or s.state == state]
    cut = 0 if show_all else max(0, len(shown) - ROW_LIMIT)
    title = (record or {}).get("experiment") or "All steps"
    return {"record": record, "inv": inv, "states": shown if show_all else shown[:ROW_LIMIT],
            "cut": cut, "counts": counts, "total": len(states), "problems": problems,
            "graph": graph, "state_filter": state,
            "families": {f: {k: c[k] for k in STATES if c[k]}
                         for f, c in sorted(families.items())},
            "title": title, "now": time.time()}


def live_states(reader: PrefixReader, inv: str) -> dict[str, Any]:
    keys, planned, record = _scope(reader, inv)
    states = reader.step_states(keys, planned)
    now = time.time()
    return {"time": now, "ended": (record or {}).get("ended"), "counts": _counts(states),
            "total": len(states),
            "states": {s.key: [s.state, fmt_seconds(s.duration(now)),
                               (s.error or "").splitlines()[0][:200] if s.error else ""]
                       for s in states}}


# -- one step ----------------------------------------------------------------------------

def step_page(reader: PrefixReader, key: str) -> dict[str, Any]:
    key = step_key_of(key)
    [state] = reader.step_states([key])
    status, status_error = reader.status_record(key)
    info, info_error = reader.info(key)
    files = _index(reader).files(key)
    if status is None and info is None and status_error is None and info_error is None \
            and not files:
        raise DashboardError(f"no step output {key} under {reader.prefix}", status=404)
    lease = reader.lease(key)
    logs = []
    for name in log_files(files):
        text, cut = read_text_tail(reader, key, name)
        logs.append({"name": name, "text": text, "cut": cut})
    config = info.get("config") if info else None
    rest = {k: v for k, v in (info or {}).items() if k not in ("config", "version")}
    return {
        "title": key, "key": key, "state": state, "status": status,
        "status_error": status_error, "info_error": info_error, "info": info,
        "config_json": json.dumps(config, indent=2, sort_keys=True, default=str)
        if info else None,
        "info_json": json.dumps(rest, indent=2, sort_keys=True, default=str),
        "version_json": json.dumps((info or {}).get("version"), indent=2, sort_keys=True,
                                   default=str),
        "lease": lease, "lease_live": lease is not None and not lease.is_stale(),
        "history": reader.history(key), "files": files, "logs": logs,
        "is_run": "metrics.jsonl" in files,
        "is_study": "report.md" in files or "fit.json" in files,
        "dependencies": state.dependencies,
        "text_files": {f for f in files if is_text(f) or f.endswith((".html", *IMAGE_TYPES))},
    }


def step_file(reader: PrefixReader, key: str, sub: str) -> tuple[bytes, str]:
    key, sub = step_key_of(key), safe_subpath(sub)
    blob = reader.storage.read(f"{reader.output_path(key)}/{sub}")
    if blob is None:
        raise DashboardError(f"no file {sub} in {key}", status=404)
    suffix = "." + sub.rpartition(".")[2].lower() if "." in sub else ""
    if suffix in (".html", ".htm"):
        return _local_plotly(blob.data), "text/html"
    if suffix in IMAGE_TYPES:
        return blob.data, IMAGE_TYPES[suffix]
    if is_text(sub):
        return blob.data, "text/plain; charset=utf-8"
    return blob.data, "application/octet-stream"


def _local_plotly(page: bytes) -> bytes:
    """Plot pages saved to load plotly.js from a CDN load the bundled copy instead (the
    dashboard may run where nothing outside is reachable)."""
    import re

    return re.sub(rb'<script[^>]*src="https://cdn\.plot\.ly/plotly-[^"]*\.js"[^>]*>',
                  b'<script charset="utf-8" src="/static/plotly.min.js">', page)


# -- training runs -----------------------------------------------------------------------

def runs_page(reader: PrefixReader, exp: str | None, selected: list[str]) -> dict[str, Any]:
    keys, planned, record = _scope(reader, exp)
    states = reader.step_states(keys, planned, with_info=False)
    kinds = _index(reader).kinds(states)
    runs = [s for s in states if "run" in kinds.get(s.key, ())]
    run_keys = [s.key for s in runs]
    chosen = [k for k in selected if k in set(run_keys)] or run_keys[:RUN_LIMIT]
    summaries = read_json_files(reader, run_keys, "summary.json")
    infos = {k: reader.info(k)[0] for k in chosen}
    metrics = metrics_json(reader, chosen, {s.key: s for s in runs})
    groups: dict[str, list[StepView]] = {}
    for s in runs:
        groups.setdefault(s.family, []).append(s)
    return {"title": "Training runs", "exp": exp or "", "record": record, "groups": groups,
            "summaries": summaries, "chosen": chosen, "metrics": metrics,
            "metric_names": METRICS, "infos": infos, "scope_total": len(keys)}


def metrics_json(reader: PrefixReader, keys: list[str],
                 known_states: dict[str, StepView] | None = None) -> dict[str, Any]:
    keys = [step_key_of(k) for k in keys]
    known = known_states or {s.key: s for s in reader.step_states(keys, with_info=False)}
    states = {key: state.state for key, state in known.items()}
    folders = {key: live_folder(state) for key, state in known.items()}
    out: dict[str, Any] = {}
    for key, data in read_metrics(reader, keys, folders).items():
        records = data["records"]
        series = {}
        for name, _ in METRICS:
            points = [(r["step"], r[name]) for r in records
                      if isinstance(r.get(name), int | float) and math.isfinite(r[name])]
            series[name] = [[p[0] for p in points], [p[1] for p in points]]
        last = next((r for r in reversed(records) if "loss" in r), {})
        out[key] = {"state": states.get(key, "PENDING"), "series": series,
                    "records": len(records), "bad_lines": data["bad_lines"],
                    "missing": data["missing"], "last": last}
    return {"time": time.time(), "runs": out}


# -- studies, caches, traces -------------------------------------------------------------

def _kind_states(reader: PrefixReader, exp: str | None, kind: str
                 ) -> tuple[list[StepView], dict[str, Any] | None]:
    keys, planned, record = _scope(reader, exp)
    states = reader.step_states(keys, planned, with_info=False)
    kinds = _index(reader).kinds(states)
    return [s for s in states if kind in kinds.get(s.key, ())], record


def studies_page(reader: PrefixReader, exp: str | None) -> dict[str, Any]:
    found, record = _kind_states(reader, exp, "study")
    listing = _index(reader).top_level(found)
    return {"title": "Studies", "studies": found, "listing": listing, "exp": exp or "",
            "record": record}


def study_page(reader: PrefixReader, key: str) -> dict[str, Any]:
    key = step_key_of(key)
    files = _index(reader).files(key)
    if "report.md" not in files and "fit.json" not in files:
        raise DashboardError(f"{key} is not a study: its output has no report.md or fit.json",
                             status=404)
    report = None
    if "report.md" in files:
        text, _ = read_text_tail(reader, key, "report.md", limit=2_000_000)
        report = render_markdown(text, key)
    fit = read_json_files(reader, [key], "fit.json")[key]
    [state] = reader.step_states([key], with_info=False)
    return {"title": key, "key": key, "state": state, "report": report,
            "plots": [f for f in files if f.endswith(".html")],
            "fit_json": json.dumps(fit, indent=2, sort_keys=True) if fit else None,
            "files": files}


def render_markdown(text: str, key: str) -> str:
    """Markdown (CommonMark with tables) to HTML; raw HTML is escaped, and relative links
    and images point into the step's output."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    for token in tokens:
        for child in token.children or ():
            attr = {"image": "src", "link_open": "href"}.get(child.type)
            if attr:
                target = str(child.attrGet(attr) or "")
                if target and "://" not in target and not target.startswith(("/", "#",
                                                                              "mailto:")):
                    sub = target.split("#")[0].lstrip("./")
                    child.attrSet(attr, f"/file?step={quote(key)}&path={quote(sub)}")
    return md.renderer.render(tokens, md.options, {})


def caches_page(reader: PrefixReader, exp: str | None) -> dict[str, Any]:
    from marin.processing.tokenize.cache_stats import read_cache_stats

    found, record = _kind_states(reader, exp, "cache")

    def stats(state: StepView) -> dict[str, Any]:
        try:
            return read_cache_stats(state.output_path).to_json()
        except Exception as e:  # one broken cache must not hide the others
            return {"error": f"{type(e).__name__}: {e}"}

    with ThreadPoolExecutor(8) as pool:
        rows = list(pool.map(stats, found))
    return {"title": "Token caches", "caches": list(zip(found, rows, strict=True)),
            "exp": exp or "", "record": record}


def traces_page(reader: PrefixReader, exp: str | None) -> dict[str, Any]:
    found, record = _kind_states(reader, exp, "traces")
    available = profiling_available()
    rows = []
    for state in found:
        for trace in _index(reader).traces(state.key):
            summary = _trace_summary(f"{state.output_path}/{trace}") if available else None
            rows.append({"step": state, "file": trace, "summary": summary})
    return {"title": "Traces", "traces": rows, "available": available, "exp": exp or "",
            "record": record}


def _trace_summary(url: str) -> dict[str, Any]:
    try:
        from marin.profiling import trace_summary

        summary = trace_summary.load(url)
        top = [(str(name), float(seconds)) for name, seconds in summary.top_kernels(10)]
        breakdown = getattr(summary, "breakdown", None)
        parts = breakdown() if callable(breakdown) else breakdown
        return {"top": top, "breakdown": dict(parts) if isinstance(parts, dict) else None}
    except Exception as e:  # the profiling module is optional and evolving
        return {"error": f"{type(e).__name__}: {e}"}

