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
    return Console(soft_wrap=True)


def _err(message: str) -> int:
    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return 2


def plugins_list(as_json: bool, load: bool = True) -> int:
    if load:
        reports = registry.check_all()
    else:
        reports = [registry.PluginReport(s, "not loaded") for g in sorted(registry.GROUPS)
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


def plugins_check() -> int:
    reports = registry.check_all()
    bad = [r for r in reports if r.status != "ok"]
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
