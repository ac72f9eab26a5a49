"""The KV service: its client, its store, and the step states published through it.

    from marin.services.kv_service.client import KVClient
    kv = KVClient.connect("iris://marin?endpoint=/system/kv")
    kv.put("config/lr", "3e-4")

Modules: ``client`` (``KVClient``, compare-and-swap by version), ``store`` (SQLite storage
inside the service), ``step_states`` (the executor's live step states, ``marin status``).
"""
