"""Route Python logging to marin's log service.

    MARIN_LOGGER=iris://marin?endpoint=/system/logger python experiments/tiny.py

    from marin.services.log_service.handler import METRICS_LOGGER, install_from_env
    install_from_env()                           # a no-op when $MARIN_LOGGER is unset
    logging.getLogger("marin.training").info("step %d", 5, extra={"step": 5})
    logging.getLogger(METRICS_LOGGER).info("metrics", extra={"step": 5, "train/loss": 3.1})

The handler never blocks on the network (it writes through ``LogClient.write_batch``). A
record's ``extra=`` fields become the entry's extra fields, ``step`` and ``run`` its own;
$MARIN_RUN names the run for entries that do not; $MARIN_LOG_LEVEL (default INFO) is the
lowest level sent. The executor installs it, and the Ray runner passes $MARIN_LOGGER on to
its workers. Importing this module imports no gRPC, pydantic or zstandard (the trainer
imports it): the client is loaded when a handler is made.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from marin.services.log_service.client import LogClient

LOGGER_ENV = "MARIN_LOGGER"
RUN_ENV = "MARIN_RUN"
LEVEL_ENV = "MARIN_LOG_LEVEL"
# Attributes every LogRecord has: anything else came from ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class LogServiceHandler(logging.Handler):
    def __init__(self, url: str, run: str = "", level: int = logging.NOTSET, **options: Any):
        super().__init__(level)
        from marin.services.log_service.client import LogClient  # grpc: only when used

        self.url = url
        self.client: LogClient = LogClient.connect(url, run=run, **options)

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("marin.services"):
            return  # the client's own warnings would feed back into it
        try:
            msg = record.getMessage()
            if record.exc_info:
                msg = f"{msg}\n{logging.Formatter().formatException(record.exc_info)}"
            entry: dict[str, Any] = {"level": record.levelname, "msg": msg,
                                     "timestamp": record.created, "source": record.name}
            for key, value in vars(record).items():
                if key not in _STANDARD and key not in entry:
                    entry[key] = value
            if not isinstance(entry.get("step"), int):
                entry.pop("step", None)
            self.client.write_batch([entry])
        except Exception:
            self.handleError(record)

    def flush(self) -> None:
        self.client.flush(timeout=10.0)

    def close(self) -> None:
        self.client.close()
        super().close()


#: The logger of metrics records: its records go to the log service alone (not to the
#: console), one entry each, the record's fields as the entry's.
METRICS_LOGGER = "marin.training.metrics"
logging.getLogger(METRICS_LOGGER).propagate = False

_installed: LogServiceHandler | None = None
_lock = threading.Lock()


def install_from_env() -> LogServiceHandler | None:
    """Attach a handler for $MARIN_LOGGER to the root logger, once per process."""
    global _installed
    url = os.environ.get(LOGGER_ENV)
    if not url:
        return None
    with _lock:
        if _installed is not None and _installed.url == url:
            return _installed
        level = logging.getLevelName(os.environ.get(LEVEL_ENV, "INFO").upper())
        if not isinstance(level, int):
            raise ValueError(f"${LEVEL_ENV}={os.environ[LEVEL_ENV]!r}: use DEBUG, INFO, "
                             "WARNING, ERROR or CRITICAL")
        handler = LogServiceHandler(url, run=os.environ.get(RUN_ENV, ""), level=level)
        root = logging.getLogger()
        if root.level > level:
            # Lower the root logger so records reach the service, and pin the existing
            # handlers to the old level so the console shows exactly what it showed before.
            for existing in root.handlers:
                if existing.level == logging.NOTSET:
                    existing.setLevel(root.level)
            root.setLevel(level)
        root.addHandler(handler)
        metrics = logging.getLogger(METRICS_LOGGER)
        metrics.addHandler(handler)
        metrics.setLevel(logging.INFO)
        atexit.register(handler.close)
        _installed = handler
        return handler


def installed() -> LogServiceHandler | None:
    return _installed
