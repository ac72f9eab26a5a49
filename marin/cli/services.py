"""The ``marin services``, ``marin kv`` and ``marin status`` commands.

    marin services up --cluster marin          # logger + KV, each its own process
    marin services status --json
    marin services serve logger --port 7000 --data /var/marin/logger
    marin kv put config/lr 3e-4 && marin kv get config/lr && marin kv list config/
    marin status                               # live step states of every executor
    marin services down

``marin logs`` lives in ``marin.cli.logs``; ``marin services serve`` takes the arguments of
``python -m marin.services.serve`` (``marin.services.serve``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from marin.cli.console import command, error, print_json, print_rows, say
from marin.cli.service_options import CLUSTER_ENV, cluster, cluster_args
from marin.services.errors import exit_statuses
from marin.services.serve import add_serve_arguments

__all__ = ["register"]

_wrap = command(exit_statuses)  # every handler: the services' errors in one line


def register(sub: argparse._SubParsersAction) -> None:
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
    serve = add_serve_arguments(ssub.add_parser("serve", help="run one service in the "
                                                "foreground (for a supervisor or a container)"))
    serve.set_defaults(handler=_serve)

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
@_wrap
def _serve(args: argparse.Namespace) -> int:
    from marin.services.serve import service_config
    from marin.services.server import serve_forever

    return serve_forever(service_config(args))


@_wrap
def _up(args: argparse.Namespace) -> int:
    from marin.services import manage

    extra = [] if args.retention_days is None else ["--retention-days",
                                                    str(args.retention_days)]
    rows = manage.up(cluster(args), args.host, args.data, args.clusters,
                     {"logger": args.logger_port, "kv": args.kv_port}, extra)
    print_rows(rows, args.json, ["service", "address", "pid", "state"],
                f"services of cluster {cluster(args)}")
    return 0


@_wrap
def _services_status(args: argparse.Namespace) -> int:
    from marin.services import manage

    rows = manage.status(cluster(args), args.clusters)
    if not rows and not args.json:
        say(f"no services registered for cluster {cluster(args)}; start them with "
            f"`marin services up --cluster {cluster(args)}`")
        return 1
    print_rows(rows, args.json, ["service", "address", "pid", "host", "state", "uptime_s",
                                  "items", "db_bytes"], f"services of cluster {cluster(args)}")
    return 0 if all(r["state"] == "up" for r in rows) else 1


@_wrap
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


@_wrap
def _kv_get(args: argparse.Namespace) -> int:
    with _kv(args) as kv:
        item = kv.get(args.key)
    if item is None:
        return error(f"no key {args.key!r}", 1)
    if args.json:
        print_json(_item_json(item), indent=None)
    else:
        sys.stdout.write(item.value.decode(errors="replace") + "\n")
    return 0


@_wrap
def _kv_put(args: argparse.Namespace) -> int:
    with _kv(args) as kv:
        item = kv.put(args.key, args.value, args.expected_version)
    if args.json:
        print_json(_item_json(item), indent=None)
    else:
        print(f"{item.key} version {item.version}")
    return 0


@_wrap
def _kv_delete(args: argparse.Namespace) -> int:
    with _kv(args) as kv:
        existed = kv.delete(args.key)
    if args.json:
        print_json({"key": args.key, "deleted": existed}, indent=None)
    else:
        print(f"{args.key} {'deleted' if existed else 'did not exist'}")
    return 0


@_wrap
def _kv_list(args: argparse.Namespace) -> int:
    with _kv(args) as kv:
        items = kv.list(args.prefix)
    rows = [_item_json(i) for i in items]
    print_rows(rows, args.json, ["key", "version", "value"], f"keys under {args.prefix!r}")
    return 0


# -- status --------------------------------------------------------------------------------
@_wrap
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
        say(f"no {'running ' if args.running else ''}steps published to {url}; an executor "
            f"publishes its steps when ${CLUSTER_ENV} (or $MARIN_KV) is set where it runs: "
            f"`export {CLUSTER_ENV}={cluster(args)}`", stderr=True)
        return 0
    if not args.json:
        now = time.time()
        for r in rows:
            r["age"] = f"{now - r['updated']:.0f}s" if r["updated"] else None
            r["where"] = f"{r.get('host')}:{r.get('pid')}"
    print_rows(rows, args.json, ["step", "state", "where", "executor", "age", "output_path"],
                "steps")
    return 0

