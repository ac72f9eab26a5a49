"""The ``marin plugins`` commands: every installed plugin, and whether it loads.

    marin plugins list --json
    marin plugins list --no-load        # entry points only, nothing imported
    marin plugins check                 # exit 1 if any plugin is broken
"""

from __future__ import annotations

import argparse

from rich.table import Table

from marin import registry
from marin.cli.console import out, print_json, reject_extra

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    plugins = sub.add_parser("plugins", help="list and check installed plugins")
    plugins_sub = plugins.add_subparsers(dest="plugins_command", metavar="ACTION", required=True)
    listing = plugins_sub.add_parser("list", help="every plugin: group, name, distribution, "
                                     "version, status")
    listing.add_argument("--json", action="store_true")
    listing.add_argument("--no-load", action="store_true",
                         help="list entry points without importing them")
    listing.set_defaults(handler=_plugins_list)
    check = plugins_sub.add_parser("check", help="load every plugin; exit 1 if any is broken")
    check.add_argument("--json", action="store_true")
    check.set_defaults(handler=_plugins_check)


def _plugins_list(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _list(args.json, load=not args.no_load)


def _plugins_check(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _check(args.json)


def _list(as_json: bool, load: bool = True) -> int:
    if load:
        reports = registry.check_all()
    else:
        reports = [registry.PluginReport(s, "not loaded") for g in registry.groups()
                   for s in registry.available(g)]
    if as_json:
        print_json([r.to_json() for r in reports])
        return 0
    table = Table(title="marin plugins", title_justify="left")
    for column in ("group", "name", "distribution", "version", "status"):
        table.add_column(column)
    for r in reports:
        style = {"ok": "green", "broken": "red", "duplicate": "red"}.get(r.status, "")
        table.add_row(r.spec.group, r.spec.name, r.spec.distribution, r.spec.version,
                      f"[{style}]{r.status}[/]" if style else r.status)
    console = out()
    console.print(table)
    for r in reports:
        if r.error:
            console.print(f"[red]{r.status}[/]: {r.error}", highlight=False)
    return 0


def _check(as_json: bool = False) -> int:
    reports = registry.check_all()
    bad = [r for r in reports if r.status != "ok"]
    if as_json:
        print_json({"ok": len(reports) - len(bad), "broken": [r.to_json() for r in bad]})
        return 1 if bad else 0
    console = out()
    for r in bad:
        console.print(f"[red]{r.status}[/]: {r.error}", highlight=False)
    console.print(f"{len(reports) - len(bad)} plugins ok, {len(bad)} broken")
    return 1 if bad else 0
