"""What each page shows: plain functions from a ``PrefixReader`` to a template's context.

    context = experiment_page(reader, "20250101-120000-1a2b3c4d", state=None, show_all=False)
    context["counts"]        # {ViewState.RUNNING: 1, ViewState.SUCCEEDED: 3}

They run in worker threads (they block on storage) and raise ``DashboardError`` for what
the page must explain: an unknown step, an empty prefix, an unreadable record.
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from marin.dashboard.bounded import read_head
from marin.dashboard.formatting import fmt_seconds
from marin.dashboard.layout import NODE_H, NODE_W, layout_graph
from marin.dashboard.metrics import METRICS, read_curves
from marin.dashboard.names import url_part
from marin.dashboard.outputs import (
    IMAGE_TYPES,
    OutputIndex,
    is_text,
    live_folder,
    log_files,
    read_json_file,
    read_json_files,
    read_text_tail,
)
from marin.dashboard.reader import DashboardError, PrefixReader, StepView, step_key_of
from marin.dashboard.records import (
    InvocationRecord,
    InvocationStep,
    ViewState,
    info_view,
    valid_time,
)
from marin.dashboard.studies import study_rows, typed_fit, typed_result
from marin.dashboard.trackers import runs_trackers, step_trackers

STATES = tuple(ViewState)  # in the order pages list them
GRAPH_LIMIT = 300
ROW_LIMIT = 500
RUN_LIMIT = 12
FILE_LIMIT = 64 << 20  # bytes /file serves; larger files are copied with the storage's tools


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
           ) -> tuple[list[str], dict[str, InvocationStep], InvocationRecord | None]:
    """Step keys, plan entries by key, and the invocation record for ``exp`` (all steps
    under the prefix when ``exp`` is empty or ``all``). Planned keys that name no step
    folder under the prefix are left out (the record's problems say so)."""
    if exp and exp != "all":
        record = reader.invocation(exp)
        planned: dict[str, InvocationStep] = {}
        for step in record.steps:
            try:
                planned[step_key_of(step.key)] = step
            except DashboardError:
                continue
        return list(planned), planned, record
    return reader.discover_steps(), {}, None


def _counts(states: list[StepView]) -> dict[ViewState, int]:
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
        current = Counter(live.get(s.key, ViewState.PENDING) for s in inv.steps)
        if inv.error:
            status = "unreadable"
        elif inv.ended is not None:
            status = "finished"
        else:
            status = "running" if current.get(ViewState.RUNNING) else "stopped (no end recorded)"
        rows.append({"inv": inv, "git_commit": (inv.git_commit or "")[:10],
                     "status": status,
                     "current": {s: current[s] for s in STATES if current.get(s)}})
    empty = None
    if not invocations and not keys:
        empty = (f"{reader.prefix} holds no executor outputs yet. Run an experiment with "
                 f"--prefix {reader.prefix} (or MARIN_PREFIX), then reload."
                 if reader.exists() else
                 f"{reader.prefix} does not exist (or is empty). Check the path; an executor "
                 "creates it on its first invocation.")
    return {"invocations": rows, "all_count": len(keys), "all_counts": _counts(states),
            "empty": empty, "title": "Experiments"}


def experiment_page(reader: PrefixReader, inv: str, state: str | None,
                    show_all: bool) -> dict[str, Any]:
    keys, planned, record = _scope(reader, inv)
    states = reader.step_states(keys, planned)
    counts = _counts(states)
    problems = [s for s in states if s.state.is_problem or s.info_error][:50]
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
    title = record.experiment if record else "All steps"
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
    return {"time": now, "ended": record.ended if record else None,
            "counts": _counts(states),
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
    view = info_view(info)
    rest = {k: v for k, v in (info or {}).items() if k not in ("config", "version")}
    problems = [p for p in (status_error, info_error) if p] + list(view.problems if view
                                                                   else ())
    return {
        "title": key, "key": key, "state": state, "status": status,
        "problems": problems, "info": view,
        "status_time": valid_time(status.time) if status else None,
        "config_json": _pretty(info.get("config")) if info else None,
        "info_json": _pretty(rest), "version_json": _pretty((info or {}).get("version")),
        "lease": lease, "lease_live": lease is not None and not lease.is_stale(),
        "history": reader.history(key), "files": files, "logs": logs,
        "is_run": "metrics.jsonl" in files,
        "trackers": step_trackers(reader, key, files, info, state.output_path),
        "is_study": "report.md" in files or "fit.json" in files,
        "dependencies": state.dependencies, "nonblocking": set(state.nonblocking),
        "text_files": {f for f in files if is_text(f) or f.endswith((".html", *IMAGE_TYPES))},
        "images": [f for f in files if f.endswith(tuple(IMAGE_TYPES))][:IMAGE_LIMIT],
    }


IMAGE_LIMIT = 24


def _pretty(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, sort_keys=True, default=str)
    except (ValueError, TypeError, RecursionError) as e:  # mixed key types, deep nesting
        return f"(cannot be shown as JSON: {type(e).__name__})"


def step_file(reader: PrefixReader, key: str, sub: str) -> tuple[bytes, str]:
    """A file of a step's output and its media type (at most ``FILE_LIMIT`` bytes)."""
    url = reader.file_url(key, sub)
    part = read_head(url, FILE_LIMIT)
    if part is None:
        raise DashboardError(f"no file {sub} in {key}", status=404)
    if not part.whole:
        raise DashboardError(f"{sub} in {key} is {part.size / 1e6:.0f} MB, more than the "
                             f"{FILE_LIMIT >> 20} MB the dashboard serves: copy it from "
                             f"{url} instead", status=413)
    suffix = "." + sub.rpartition(".")[2].lower() if "." in sub else ""
    if suffix in (".html", ".htm"):
        return _local_plotly(part.data), "text/html"
    if suffix in IMAGE_TYPES:
        return part.data, IMAGE_TYPES[suffix]
    if is_text(sub):
        return part.data, "text/plain; charset=utf-8"
    return part.data, "application/octet-stream"


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
    run_keys = {s.key for s in runs}
    wanted = list(dict.fromkeys(k for k in selected if k in run_keys))
    chosen = wanted[:RUN_LIMIT] or [s.key for s in runs[:RUN_LIMIT]]
    # The table lists ROW_LIMIT runs, the chosen ones always among them.
    listed = [s for s in runs if s.key in chosen] + \
        [s for s in runs if s.key not in chosen][:max(0, ROW_LIMIT - len(chosen))]
    listed.sort(key=runs.index)
    summaries = read_json_files(reader, [s.key for s in listed], "summary.json")
    infos = {k: info_config(reader, k) for k in chosen}
    trackers = runs_trackers(reader, listed, infos)
    metrics = metrics_json(reader, chosen, {s.key: s for s in runs})
    groups: dict[str, list[StepView]] = {}
    for s in listed:
        groups.setdefault(s.family, []).append(s)
    return {"title": "Training runs", "exp": exp or "", "record": record, "groups": groups,
            "summaries": summaries, "chosen": chosen, "metrics": metrics, "trackers": trackers,
            "metric_names": METRICS, "infos": infos, "scope_total": len(keys),
            "unlisted": len(runs) - len(listed), "unchosen": len(wanted) - len(chosen),
            "run_limit": RUN_LIMIT}


def info_config(reader: PrefixReader, key: str) -> dict[str, Any]:
    """A step's config from its info (empty when it has none, or it is no JSON object)."""
    config = (reader.info(key)[0] or {}).get("config")
    return config if isinstance(config, dict) else {}


def metrics_json(reader: PrefixReader, keys: list[str],
                 known_states: dict[str, StepView] | None = None) -> dict[str, Any]:
    """The curves of up to ``RUN_LIMIT`` runs, each read within ``metrics.BUDGET``."""
    keys = list(dict.fromkeys(step_key_of(k) for k in keys))
    if len(keys) > RUN_LIMIT:
        raise DashboardError(f"{len(keys)} runs asked for: the charts show at most "
                             f"{RUN_LIMIT} at once; pick fewer", status=400)
    known = known_states or {s.key: s for s in reader.step_states(keys, with_info=False)}
    out: dict[str, Any] = {}
    for key in keys:
        state = known.get(key)
        curves = read_curves(_metrics_url(reader, key, state))
        out[key] = {"state": state.state if state else ViewState.PENDING, **curves.to_json()}
    return {"time": time.time(), "runs": out}


def _metrics_url(reader: PrefixReader, key: str, state: StepView | None) -> str | None:
    """Where a run's metrics are now (a running step's are in its attempt folder), or None
    when that path is no file of the step's output."""
    output = reader.output_path(key)
    folder = live_folder(state) if state else output
    try:
        return reader.file_url(key, f"{folder[len(output) + 1:]}/metrics.jsonl"
                               if folder != output else "metrics.jsonl")
    except DashboardError:
        return None


# -- studies, caches, traces -------------------------------------------------------------

def _kind_states(reader: PrefixReader, exp: str | None, kind: str
                 ) -> tuple[list[StepView], dict[str, Any] | None]:
    keys, planned, record = _scope(reader, exp)
    states = reader.step_states(keys, planned, with_info=False)
    kinds = _index(reader).kinds(states)
    return [s for s in states if kind in kinds.get(s.key, ())], record


def studies_page(reader: PrefixReader, exp: str | None) -> dict[str, Any]:
    found, record = _kind_states(reader, exp, "study")
    rows = study_rows(reader, found, _index(reader).top_level(found))
    return {"title": "Studies", "studies": rows, "exp": exp or "", "record": record}


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
    study, study_error = typed_result(reader, key, files)
    fits = fit_json = None
    if "fit.json" in files:  # a study's fit is shown typed; another step's fit.json as JSON
        fits, fit_error = typed_fit(reader, key)
        if fits is None:
            raw = read_json_file(reader, key, "fit.json")
            fit_json = _pretty(raw) if raw else None
            study_error = study_error or (fit_error if report is None else None)
    [state] = reader.step_states([key], with_info=False)
    return {"title": key, "key": key, "state": state, "report": report,
            "plots": [f for f in files if f.endswith(".html")], "fits": fits,
            "fit_json": fit_json, "study": study, "study_error": study_error,
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
                    child.attrSet(attr, f"/file?step={url_part(key)}&path={url_part(sub)}")
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

