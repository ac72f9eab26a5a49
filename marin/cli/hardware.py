"""The ``marin hardware`` commands: accelerator presets, and the one that applies here.

    marin hardware show                     # devices found, the preset, the flags in force
    marin hardware show --hardware gpu-h200 --json
    marin hardware list
"""

from __future__ import annotations

import argparse

from rich.table import Table

from marin import registry
from marin.cli.console import error, out, print_json, reject_extra, warn

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    hardware = sub.add_parser("hardware", help="accelerator presets")
    hardware_sub = hardware.add_subparsers(dest="hardware_command", metavar="ACTION",
                                           required=True)
    show = hardware_sub.add_parser("show", help="devices found, the preset that applies, "
                                   "the flags in force")
    show.add_argument("--hardware", metavar="PRESET", help="a preset name (default: detected)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=_hardware_show)
    presets = hardware_sub.add_parser("list", help="installed presets")
    presets.add_argument("--json", action="store_true")
    presets.set_defaults(handler=_hardware_list)


def _hardware_show(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _show(args.hardware, args.json)


def _hardware_list(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _list(args.json)


def _list(as_json: bool) -> int:
    from marin.hardware import get_preset, preset_names

    presets = []
    for name in preset_names():
        try:
            presets.append(get_preset(name))
        except registry.PluginError as e:
            warn(str(e), "broken")
    if as_json:
        print_json([p.to_json() for p in presets])
        return 0
    table = Table(title="hardware presets", title_justify="left")
    for column in ("name", "chip", "peak bf16 TFLOP/s", "memory GB", "XLA flags"):
        table.add_column(column)
    for p in presets:
        table.add_row(p.name, p.chip, f"{p.peak_bf16_flops / 1e12:g}",
                      f"{p.memory_bytes / 1e9:.0f}", str(len(p.xla_flags) +
                                                       len(p.libtpu_init_args)))
    out().print(table)
    return 0


def _show(name: str | None, as_json: bool) -> int:
    from marin.hardware import get_preset, plan_preset
    from marin.hardware.detect import detect

    try:
        chosen = get_preset(name) if name else None
    except registry.PluginError as e:
        return error(str(e))
    found = detect()
    preset = chosen or (get_preset(found["preset"]) if found.get("preset") else None)
    applied = plan_preset(preset) if preset else None
    if as_json:
        print_json({**found, "preset": preset.to_json() if preset else None,
                    "applied": applied.to_json() if applied else None})
        return 0
    console = out()
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
