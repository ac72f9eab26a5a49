"""The ``marin services``, ``marin logs``, ``marin kv`` and ``marin status`` commands.

    marin services up --cluster marin          # logger + KV, each its own process
    marin services status --json
    marin services serve logger --port 7000 --data /var/marin/logger
    marin logs tail --follow --run r1 --level WARNING --grep nan
    marin logs query --since 1h --json
    marin kv put config/lr 3e-4 && marin kv get config/lr && marin kv list config/
    marin status                               # live step states of every executor
    marin services down

The ``marin logs`` handlers live in ``log_service.commands``, ``marin services serve`` in
``serve``, what the commands share in ``cli_support``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from rich.console import Console

from marin.services.cli_support import (
    CLUSTER_ENV,
    cluster,
    cluster_args,
    fail,
    print_rows,
    wrap,
)
from marin.services.log_service.commands import log_filters, logs_query, logs_tail
from marin.services.serve import add_serve_arguments

__all__ = ["add_parsers"]


def add_parsers(sub: argparse._SubParsersAction) -> None:
    services = sub.add_parser("services", help="the log and KV services")
    ssub = services.add_subparsers(dest="services_command", metavar="ACTION", required=True)
    up = ssub.add_parser("up", help="start the logger and KV services and register them")
    cluster_args(up)
    up.add_argument("--host", default="127.0.0.1", help="address to listen on (default "
                    "127.0.0.1; any other needs the token this command generates)")
    up.add_argument("--data", help="storage folder (default: ~/.marin/services/CLUSTER)")
    up.add_argument("--logger-port", type=int, default=0)
    up.add_argument("--kv-port", type=int, default=0)
    up.add_argument("--retention-days", type=float, default=None)
    up.add_argument("--json", action="store_true")
    up.set_defaults(handler=_up)
    st = ssub.add_parser("status", help="endpoint, pid, uptime and counts of each service")
    cluster_args(st)
    st.add_argument("--json", action="store_true")
    st.set_defaults(handler=_services_status)
    dn = ssub.add_parser("down", help="stop this machine's services of a cluster")
    cluster_args(dn)
    dn.add_argument("--json", action="store_true")
    dn.set_defaults(handler=_down)
    add_serve_arguments(ssub.add_parser("serve", help="run one service in the foreground (for a "
                               "supervisor or a container)"))

    logs = sub.add_parser("logs", help="read the log service")
    lsub = logs.add_subparsers(dest="logs_command", metavar="ACTION", required=True)
    tail = lsub.add_parser("tail", help="the latest entries; --follow for new ones")
    log_filters(tail)
    tail.add_argument("-n", "--lines", type=int, default=20)
    tail.add_argument("--follow", "-f", action="store_true")
    tail.set_defaults(handler=logs_tail)
    query = lsub.add_parser("query", help="entries matching filters, oldest first")
    log_filters(query)
    query.add_argument("--limit", type=int, default=1000)
    query.set_defaults(handler=logs_query)

    kv = sub.add_parser("kv", help="read and write the KV service")
    ksub = kv.add_subparsers(dest="kv_command", metavar="ACTION", required=True)
    get = ksub.add_parser("get", help="a key's value")
    get.add_argument("key")
    put = ksub.add_parser("put", help="set a key (--expected-version for compare-and-swap)")
    put.add_argument("key")
    put.add_argument("value")
    put.add_argument("--expected-version", type=int, default=None)
    lst = ksub.add_parser("list", help="keys under a prefix")
    lst.add_argument("prefix", nargs="?", default="")
    dele = ksub.add_parser("delete", help="remove a key")
    dele.add_argument("key")
    for p, fn in ((get, _kv_get), (put, _kv_put), (lst, _kv_list), (dele, _kv_delete)):
        cluster_args(p)
        p.add_argument("--url", help="the KV service (default: iris://CLUSTER?endpoint="
                       "/system/kv)")
        p.add_argument("--json", action="store_true")
        p.set_defaults(handler=fn)

    status = sub.add_parser("status", help="live step states that executors publish to the "
                            "cluster's KV service")
    cluster_args(status)
    status.add_argument("--url", help="the KV service (default: $MARIN_KV, else "
                        "iris://CLUSTER?endpoint=/system/kv)")
    status.add_argument("--running", action="store_true", help="only running steps")
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_status)


# -- services ------------------------------------------------------------------------------
@wrap
def _up(args: argparse.Namespace) -> int:
    from marin.services import manage

    extra = [] if args.retention_days is None else ["--retention-days",
                                                    str(args.retention_days)]
    rows = manage.up(cluster(args), args.host, args.data, args.clusters,
                     {"logger": args.logger_port, "kv": args.kv_port}, extra)
    print_rows(rows, args.json, ["service", "address", "pid", "state"],
                f"services of cluster {cluster(args)}")
    return 0


@wrap
def _services_status(args: argparse.Namespace) -> int:
    from marin.services import manage

    rows = manage.status(cluster(args), args.clusters)
    if not rows and not args.json:
        Console().print(f"no services registered for cluster {cluster(args)}; start them "
                        f"with `marin services up --cluster {cluster(args)}`", markup=False,
                        highlight=False, soft_wrap=True)
        return 1
    print_rows(rows, args.json, ["service", "address", "pid", "host", "state", "uptime_s",
                                  "items", "db_bytes"], f"services of cluster {cluster(args)}")
    return 0 if all(r["state"] == "up" for r in rows) else 1


@wrap
def _down(args: argparse.Namespace) -> int:
    from marin.services import manage

    rows = manage.down(cluster(args), args.clusters)
    print_rows(rows, args.json, ["endpoint", "pid", "state"],
                f"services of cluster {cluster(args)}")
    return 0


# -- kv ------------------------------------------------------------------------------------
def _kv(args: argparse.Namespace):
    from marin.services.kv_service.client import KVClient
    from marin.services.manage import service_url

    return KVClient.connect(args.url or service_url(cluster(args), "kv", args.clusters))


def _item_json(item) -> dict[str, Any]:
    return {"key": item.key, "value": item.value.decode(errors="replace"),
            "version": item.version, "updated": item.updated}


@wrap
def _kv_get(args: argparse.Namespace) -> int:
    with _kv(args) as kv:
        item = kv.get(args.key)
    if item is None:
        return fail(f"no key {args.key!r}", 1)
    if args.json:
        print(json.dumps(_item_json(item)))
    else:
        sys.stdout.write(item.value.decode(errors="replace") + "\n")
    return 0


@wrap
def _kv_put(args: argparse.Namespace) -> int:
    with _kv(args) as kv:
        item = kv.put(args.key, args.value, args.expected_version)
    print(json.dumps(_item_json(item)) if args.json else f"{item.key} version {item.version}")
    return 0


@wrap
def _kv_delete(args: argparse.Namespace) -> int:
    with _kv(args) as kv:
        existed = kv.delete(args.key)
    print(json.dumps({"key": args.key, "deleted": existed}) if args.json else
          f"{args.key} {'deleted' if existed else 'did not exist'}")
    return 0


@wrap
def _kv_list(args: argparse.Namespace) -> int:
    with _kv(args) as kv:
        items = kv.list(args.prefix)
    rows = [_item_json(i) for i in items]
    print_rows(rows, args.json, ["key", "version", "value"], f"keys under {args.prefix!r}")
    return 0


# -- status --------------------------------------------------------------------------------
@wrap
def _status(args: argparse.Namespace) -> int:
    from marin.services.kv_service.client import KVClient
    from marin.services.kv_service.step_states import read_states
    from marin.services.manage import service_url

    url = args.url or (os.environ.get("MARIN_KV") if not args.cluster else None) \
        or service_url(cluster(args), "kv", args.clusters)
    with KVClient.connect(url) as kv:
        rows = read_states(kv)
    if args.running:
        rows = [r for r in rows if r.get("state") == "running"]
    if not rows and not args.json:
        Console(stderr=True).print(
            f"no {'running ' if args.running else ''}steps published to {url}; an executor "
            f"publishes its steps when ${CLUSTER_ENV} (or $MARIN_KV) is set where it runs: "
            f"`export {CLUSTER_ENV}={cluster(args)}`", highlight=False, markup=False,
            soft_wrap=True)
        return 0
    if not args.json:
        now = time.time()
        for r in rows:
            r["age"] = f"{now - r['updated']:.0f}s" if r["updated"] else None
            r["where"] = f"{r.get('host')}:{r.get('pid')}"
    print_rows(rows, args.json, ["step", "state", "where", "executor", "age", "output_path"],
                "steps")
    return 0

