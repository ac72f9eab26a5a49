"""marin's services: a log service and a KV service, each in its own process.

    marin services up                                   # both, registered for cluster marin
    from marin.inference.client import LogClient
    log = LogClient.connect("iris://marin?endpoint=/system/logger")
    from marin.services.kv_client import KVClient
    kv = KVClient.connect("iris://marin?endpoint=/system/kv")

Modules: ``server`` (the gRPC servers), ``logstore``/``kvstore`` (SQLite storage),
``endpoints`` (a cluster's endpoint registry), ``resolve`` (URL resolvers), ``manage``
(up/status/down), ``cli`` (the commands). See docs/services.md.
"""
