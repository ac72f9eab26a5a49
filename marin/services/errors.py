"""The services' errors by what they mean to a caller: its input, or the services.

    for types, status in exit_statuses():       # a command's exit status for each error
        ...

A bad setting or value (``ServiceConfigError``, ``ValueError``) is the caller's input:
status 2. A service that cannot be reached, resolved or started, or a compare-and-swap that
lost, is the services' answer: status 1. The classes are imported when asked for, so that
a command line that never talks to a service loads no gRPC.
"""

from __future__ import annotations

__all__ = ["exit_statuses"]


def exit_statuses() -> list[tuple[tuple[type[BaseException], ...], int]]:
    """(error classes, exit status) pairs, the first that matches wins."""
    from marin.services.channel import ServiceError
    from marin.services.kv_service.client import VersionConflictError
    from marin.services.manage import ServicesError
    from marin.services.resolve import ResolutionError
    from marin.services.server import ServiceConfigError

    return [((ServiceConfigError, ValueError), 2),
            ((ServiceError, ResolutionError, ServicesError, VersionConflictError), 1)]
