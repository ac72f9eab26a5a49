"""The log service: what writes to it, what it stores, and what reads it back.

    from marin.services.log_service.client import LogClient      # the writer
    log = LogClient.connect("iris://marin?endpoint=/system/logger")
    from marin.services.log_service.handler import install_from_env  # Python logging -> it

Modules: ``client`` (``LogClient``, batching writes in the background), ``entries`` (the
entry schema and its validation), ``handler`` (a ``logging.Handler``), ``store`` (SQLite
storage inside the service), ``reader`` (queries and paging), ``commands`` (``marin logs``).
``marin.inference.client`` re-exports ``LogClient`` under its documented name.
"""
