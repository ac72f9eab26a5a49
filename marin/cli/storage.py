"""The ``marin storage`` commands: whether a bucket suits checkpoints and datasets.

    marin storage check gs://my-bucket --compute-region us-central1
    marin storage check s3://my-bucket --json
"""

from __future__ import annotations

import argparse

from marin import registry
from marin.cli.console import error, out, print_json, reject_extra

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    storage = sub.add_parser("storage", help="storage utilities")
    storage_sub = storage.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    bucket = storage_sub.add_parser("check", help="a bucket's location, location type and "
                                    "storage class, with warnings")
    bucket.add_argument("url")
    bucket.add_argument("--compute-region", help="where the accelerators run "
                        "(default: $MARIN_COMPUTE_REGION)")
    bucket.add_argument("--json", action="store_true")
    bucket.set_defaults(handler=_storage_check)


def _storage_check(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _check(args.url, args.compute_region, args.json)


def _check(url: str, compute_region: str | None, as_json: bool) -> int:
    from marin.storage import StorageError
    from marin.storage.bucket import bucket_info, bucket_warnings
    from marin.storage.bucket import compute_region as default_region

    region = compute_region or default_region()
    problem = _not_a_location(url)
    if problem:
        return error(problem)
    try:
        info = bucket_info(url)
    except (StorageError, registry.PluginError) as e:
        return error(str(e))
    warnings = bucket_warnings(info, region)
    if as_json:
        print_json({**info.to_json(), "compute_region": region, "warnings": warnings})
        return 0
    console = out()
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
