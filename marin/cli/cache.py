"""The ``marin cache`` commands: the figures of token caches.

    marin cache stats local_store/tokenized
    marin cache stats gs://bucket/tokenized/fineweb --json
"""

from __future__ import annotations

import argparse

from rich.table import Table

from marin import registry
from marin.cli.console import error, out, print_json, reject_extra

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    cache = sub.add_parser("cache", help="token caches")
    cache_sub = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    stats = cache_sub.add_parser("stats", help="figures of every token cache under a path")
    stats.add_argument("path", help="a cache, or a prefix holding caches (any fsspec URL)")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(handler=_cache_stats)


def _cache_stats(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _stats(args.path, args.json)


def _stats(path: str, as_json: bool) -> int:
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
        return error(str(e))
    if not rows:  # the same answer with and without --json
        return error(f"no token cache at or under {path}")
    if as_json:  # damaged caches are rows with an "error"; figures are always finite
        print_json([r.to_json() for r in rows], allow_nan=False)
    else:
        good = [r.stats for r in rows if r.stats is not None]
        if good:
            out().print(_cache_table(path, good))
    for row in rows:
        if row.error is not None:
            error(row.error)
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
