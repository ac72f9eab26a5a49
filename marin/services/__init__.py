"""marin's services: a log service and a KV service, each in its own process.

    marin services up                                   # both, registered for cluster marin
    from marin.services.log_service.client import LogClient
    log = LogClient.connect("iris://marin?endpoint=/system/logger")
    from marin.services.kv_service.client import KVClient
    kv = KVClient.connect("iris://marin?endpoint=/system/kv")

Packages by the service they serve: ``log_service`` (writer, handler, store, reader) and
``kv_service`` (client, store, live step states). Shared at the top: ``server`` (the gRPC
servers), ``serve`` (one service's process), ``channel``/``codec`` (transport),
``endpoints`` (a cluster's endpoint registry), ``resolve`` (URL resolvers), ``manage``
(up/status/down), ``errors`` (what each error means to a caller). The commands
(``marin services``, ``kv``, ``status``, ``logs``) live in ``marin.cli``. See
docs/services.md.
"""
