"""The bodies of the small ``marin`` subcommands (plugins, storage, hardware).

    marin plugins list --json
    marin storage check gs://my-bucket --compute-region us-central1
    marin hardware show --hardware gpu-h200
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from marin import registry


def _out() -> Console:
    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console.width = 200  # tables in logs and pipes keep their columns
    return console


def _err(message: str) -> int:
    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return 2


def plugins_list(as_json: bool, load: bool = True) -> int:
    if load:
        reports = registry.check_all()
    else:
        reports = [registry.PluginReport(s, "not loaded") for g in registry.groups()
                   for s in registry.available(g)]
    if as_json:
        print(json.dumps([r.to_json() for r in reports], indent=1))
        return 0
    table = Table(title="marin plugins", title_justify="left")
    for column in ("group", "name", "distribution", "version", "status"):
        table.add_column(column)
    for r in reports:
        style = {"ok": "green", "broken": "red", "duplicate": "red"}.get(r.status, "")
        table.add_row(r.spec.group, r.spec.name, r.spec.distribution, r.spec.version,
                      f"[{style}]{r.status}[/]" if style else r.status)
    console = _out()
    console.print(table)
    for r in reports:
        if r.error:
            console.print(f"[red]{r.status}[/]: {r.error}", highlight=False)
    return 0


def plugins_check(as_json: bool = False) -> int:
    reports = registry.check_all()
    bad = [r for r in reports if r.status != "ok"]
    if as_json:
        print(json.dumps({"ok": len(reports) - len(bad), "broken": [r.to_json() for r in bad]},
                         indent=1))
        return 1 if bad else 0
    console = _out()
    for r in bad:
        console.print(f"[red]{r.status}[/]: {r.error}", highlight=False)
    console.print(f"{len(reports) - len(bad)} plugins ok, {len(bad)} broken")
    return 1 if bad else 0


def storage_check(url: str, compute_region: str | None, as_json: bool) -> int:
    from marin.storage import StorageError
    from marin.storage.bucket import bucket_info, bucket_warnings
    from marin.storage.bucket import compute_region as default_region

    region = compute_region or default_region()
    problem = _not_a_location(url)
    if problem:
        return _err(problem)
    try:
        info = bucket_info(url)
    except (StorageError, registry.PluginError) as e:
        return _err(str(e))
    warnings = bucket_warnings(info, region)
    if as_json:
        print(json.dumps({**info.to_json(), "compute_region": region, "warnings": warnings},
                         indent=1))
        return 0
    console = _out()
    console.print(f"[bold]{info.url}[/] ({info.provider})")
    console.print(f"  location:      {info.location}")
    console.print(f"  location type: {info.location_type}")
    console.print(f"  storage class: {info.storage_class or 'n/a (set per object)'}")
    if region:
        console.print(f"  compute region: {region}")
    for warning in warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if not warnings:
        console.print("[green]ok:[/] suitable for checkpoints and datasets")
    return 0


def _not_a_location(url: str) -> str | None:
    """Why ``url`` names neither a bucket nor an existing folder (None when it does)."""
    import os

    from marin.storage import scheme_of
    from marin.storage._local import local_path

    if not url.strip():
        return "no URL given: name a bucket (gs://bucket, s3://bucket) or a folder"
    if scheme_of(url) == "file" and not os.path.isdir(local_path(url)):
        what = "is a file" if os.path.exists(local_path(url)) else "does not exist"
        return f"{url} {what}: name a bucket (gs://bucket, s3://bucket) or an existing folder"
    return None


def hardware_list(as_json: bool) -> int:
    from marin.hardware import get_preset, preset_names

    presets = []
    for name in preset_names():
        try:
            presets.append(get_preset(name))
        except registry.PluginError as e:
            Console(stderr=True).print(f"[red]broken:[/] {e}", highlight=False)
    if as_json:
        print(json.dumps([p.to_json() for p in presets], indent=1))
        return 0
    table = Table(title="hardware presets", title_justify="left")
    for column in ("name", "chip", "peak bf16 TFLOP/s", "memory GB", "XLA flags"):
        table.add_column(column)
    for p in presets:
        table.add_row(p.name, p.chip, f"{p.peak_bf16_flops / 1e12:g}",
                      f"{p.memory_bytes / 1e9:.0f}", str(len(p.xla_flags) +
                                                       len(p.libtpu_init_args)))
    _out().print(table)
    return 0


def hardware_show(name: str | None, as_json: bool) -> int:
    from marin.hardware import get_preset, plan_preset
    from marin.hardware.detect import detect

    try:
        chosen = get_preset(name) if name else None
    except registry.PluginError as e:
        return _err(str(e))
    found = detect()
    preset = chosen or (get_preset(found["preset"]) if found.get("preset") else None)
    applied = plan_preset(preset) if preset else None
    if as_json:
        print(json.dumps({**found, "preset": preset.to_json() if preset else None,
                          "applied": applied.to_json() if applied else None}, indent=1))
        return 0
    console = _out()
    console.print(f"[bold]jax[/] {found.get('jax') or 'not installed'}; devices:")
    for d in found["devices"]:
        console.print(f"  {d['id']}: {d['platform']} {d['kind']}")
    if found.get("note"):
        console.print(f"  note: {found['note']}")
    if preset is None or applied is None:
        console.print("no preset applies")
        return 0
    console.print(f"[bold]preset[/] {preset.name}: {preset.chip}, "
                  f"{preset.peak_bf16_flops / 1e12:g} TFLOP/s bf16, "
                  f"{preset.memory_bytes / 1e9:g} GB")
    console.print(f"  XLA_FLAGS: {' '.join(applied.xla_flags) or '(none)'}")
    for flag in applied.dropped_flags:
        console.print(f"  [yellow]dropped[/] {flag}: unknown to the installed jaxlib")
    if applied.libtpu_init_args:
        console.print(f"  LIBTPU_INIT_ARGS: {' '.join(applied.libtpu_init_args)}")
    for key, value in applied.env.items():
        console.print(f"  {key}={value}")
    for note in applied.notes:
        console.print(f"  note: {note}")
    if preset.batch_size_advice:
        console.print(f"  batch size: {preset.batch_size_advice}")
    return 0


def _heuristic(name: str, vocab_size: int | None, seq_len: int | None, hardware: str | None):
    cls = registry.load("scaling_heuristics", name)
    options = {k: v for k, v in (("vocab_size", vocab_size), ("seq_len", seq_len),
                                 ("hardware", hardware)) if v is not None}
    try:
        return cls(**options)
    except TypeError as e:
        raise ValueError(f"heuristic {name!r} does not accept {sorted(options)}: {e}") from e


def scaling_candidates(budget: float, heuristic_name: str, hardware: str | None,
                       vocab_size: int | None, seq_len: int | None, as_json: bool) -> int:
    from marin.scaling_laws.candidates import NoCandidateError

    try:
        heuristic = _heuristic(heuristic_name, vocab_size, seq_len, hardware)
        if hardware:
            from marin.hardware import get_preset

            get_preset(hardware)
        explain = getattr(heuristic, "candidates_or_explain", None)
        candidates = explain(budget) if explain else list(heuristic.candidates_for_budget(budget))
    except (registry.PluginError, NoCandidateError, ValueError) as e:
        return _err(str(e))
    if as_json:
        print(json.dumps([c.to_json() for c in candidates], indent=1, default=str))
        return 0
    table = Table(title=f"{len(candidates)} candidates for {budget:.3g} FLOPs "
                  f"({heuristic_name})", title_justify="left")
    for column in ("hidden", "layers", "params", "batch", "steps", "tokens", "tok/param",
                   "FLOPs", "lr", "beta2", "mem/dev GB", "device-h"):
        table.add_column(column, justify="right")
    for c in candidates:
        m = c.model_config
        table.add_row(str(m.hidden_dim), str(m.num_layers), f"{c.params:.3g}",
                      str(c.batch_size), str(c.train_steps), f"{c.tokens:.3g}",
                      f"{c.tokens_per_param:.1f}", f"{c.flops:.3g}",
                      f"{c.optimizer.learning_rate:.2e}", f"{c.optimizer.beta2:.5f}",
                      f"{c.estimated_memory_per_device / 1e9:.1f}",
                      "-" if c.estimated_device_hours is None
                      else f"{c.estimated_device_hours:.3g}")
    _out().print(table)
    return 0


def scaling_fit(results: str | list[str], target: float | None, out_dir: str | None,
                bootstrap: int, heuristic_name: str, as_json: bool, metric: str = "loss",
                label: str | None = None) -> int:
    """The study's fitting pipeline on finished runs (tables, run folders, folders of runs;
    ``marin.scaling_laws.results.read_runs``): every label fitted on ``metric``, and
    ``fit.json`` in the study's schema (``StudyFits``)."""
    import math

    from marin.scaling_laws.results import ResultsError, read_runs
    from marin.scaling_laws.study.analysis import fit_labels
    from marin.scaling_laws.study.artifacts import FIT, StudyResult, write_artifact

    if target is not None and not (math.isfinite(target) and target > 0):
        return _err(f"--target must be a positive FLOP budget such as 3e19, got {target}")
    if bootstrap < 0:
        return _err(f"--bootstrap must be 0 (no standard errors) or more, got {bootstrap}")
    try:
        rows = read_runs(results, metric, label)
        labels = list(dict.fromkeys(r.label for r in rows))
        fits = fit_labels(rows, labels, metric=metric, targets=[target] if target else [],
                          bootstrap=bootstrap, compare_at=[target] if target else [])
    except (ResultsError, ValueError) as e:
        return _err(str(e))
    nearest = _nearest(heuristic_name, fits, target) if target else {}
    report: dict = {"fit": fits.to_json(), "nearest_candidates": {
        label: json.loads(json.dumps(c.to_json(), default=str)) if c else None
        for label, c in nearest.items()}}
    if out_dir:
        import os

        from marin.scaling_laws.study.report_plots import draw_plots

        os.makedirs(out_dir, exist_ok=True)
        study = StudyResult(title="", metric=fits.metric, labels=fits.labels, fits=fits.fits,
                            comparisons=fits.comparisons, runs=tuple(rows),
                            model_error=fits.model_error,
                            why_no_model_error=fits.why_no_model_error)
        stems = draw_plots(study, out_dir, target=target)
        files = [os.path.join(out_dir, f"{stem}.{kind}") for stem in stems
                 for kind in ("png", "html")]
        report["files"] = [*files, write_artifact(out_dir, FIT, fits)]
    if as_json:
        print(json.dumps(report, indent=1, allow_nan=False))
        return 0
    _print_fit(fits, nearest, report.get("files", []))
    return 0


def _nearest(heuristic_name: str, fits, target: float) -> dict:
    """Per label, the heuristic's candidate nearest the optimal size at ``target``."""
    from marin.scaling_laws.candidates import nearest_candidate

    heuristic = _heuristic(heuristic_name, None, None, None)
    candidates = list(heuristic.candidates_for_budget(target))
    out = {}
    for label, fit in fits.fits.items():
        best = fit.predictions[0].best if fit.predictions else None
        out[label] = nearest_candidate(candidates, best[1].params) if best else None
    return out


def _print_fit(fits, nearest: dict, files: list[str]) -> None:
    from marin.scaling_laws.study.summary import fmt, fmt_interval, label_lines

    console = _out()
    for label, fit in fits.fits.items():
        if len(fits.labels) > 1:
            console.print(f"[bold]label {label}[/]")
        console.print(f"[bold]{fit.runs} runs[/], {len(fit.excluded)} dropped "
                      "(failed, NaN, infinite or non-positive)")
        table = Table(title="IsoFLOP minima (Approach 2)", title_justify="left")
        for column in ("budget", "runs", "optimal tokens", "95% interval", "optimal params",
                       "loss"):
            table.add_column(column, justify="right")
        for b in fit.budgets:
            table.add_row(f"{b.budget:.3g}", str(b.points), f"{b.optimal_tokens:.3g}",
                          fmt_interval(b.optimal_tokens_interval), f"{b.optimal_params:.3g}",
                          f"{b.optimal_loss:.4f}")
        for b in fit.budgets_not_fitted:
            table.add_row(f"{b.budget:.3g}", str(b.runs), f"not fitted: {b.reason}", "", "", "")
        console.print(table)
        for line in label_lines(fit, None)[1:]:
            console.print(line, highlight=False)
        for p in fit.predictions:
            for approach, optimum in (("Approach 2", p.approach2), ("Approach 3", p.approach3)):
                if optimum is not None:
                    console.print(f"[bold]at {p.budget:.3g} FLOPs[/] ({approach}): N_opt "
                                  f"{fmt(optimum.params)} (95% "
                                  f"{fmt_interval(optimum.params_interval)}), D_opt "
                                  f"{fmt(optimum.tokens)}, loss {fmt(optimum.loss, 4)}",
                                  highlight=False)
        c = nearest.get(label)
        if c is not None:
            console.print(f"  nearest candidate: hidden {c.model_config.hidden_dim}, "
                          f"{c.model_config.num_layers} layers, {c.params:.3g} params, batch "
                          f"{c.batch_size}, {c.train_steps} steps")
    from marin.scaling_laws.study.summary import comparison_line

    for c in fits.comparisons:
        console.print(comparison_line(c), highlight=False)
    for f in files:
        console.print(f"  wrote {f}")


def cache_stats(path: str, as_json: bool) -> int:
    """Every cache under ``path``: a damaged one is a line of its own (and exit status 2);
    the others are still shown."""
    from marin.processing.tokenize.cache_stats import prefix_cache_stats
    from marin.storage import AsyncObjectStorage, get_storage

    try:
        storage = get_storage(path)
        if isinstance(storage, AsyncObjectStorage):
            storage.fs  # noqa: B018 -- fails in one line when the endpoint is unreachable
        rows = prefix_cache_stats(path)
    except (OSError, registry.PluginError) as e:
        return _err(str(e))
    if not rows:  # the same answer with and without --json
        return _err(f"no token cache at or under {path}")
    if as_json:  # damaged caches are rows with an "error"; figures are always finite
        print(json.dumps([r.to_json() for r in rows], indent=1, allow_nan=False))
    else:
        good = [r.stats for r in rows if r.stats is not None]
        if good:
            _out().print(_cache_table(path, good))
    for row in rows:
        if row.error is not None:
            _err(row.error)
    return 2 if any(r.error is not None for r in rows) else 0


def _cache_table(path: str, stats: list) -> Table:
    table = Table(title=f"token caches under {path}", title_justify="left")
    for column in ("cache", "tokenizer", "complete", "documents", "tokens", "bytes", "shards",
                   "tokens/byte", "builds", "hits", "hit rate"):
        table.add_column(column, justify="left" if column == "cache" else "right")
    for s in stats:
        table.add_row(s.path, s.tokenizer, "yes" if s.complete else "no",
                      f"{s.total_elements:,}", f"{s.total_tokens:,}", f"{s.bytes:,}",
                      str(s.shards), f"{s.tokens_per_byte:.3f}", str(s.builds), str(s.hits),
                      f"{s.hit_rate:.0%}")
    return table
