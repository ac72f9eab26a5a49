"""Turn a service URL into an address, through the ``marin.resolvers`` plugin group.

    target = resolve("iris://marin?endpoint=/system/logger")   # Target("127.0.0.1:40123")
    resolve("http://10.0.0.5:7000"); resolve("10.0.0.5:7000")    # direct addresses
    resolve(url, refresh=True)                                  # after a failed call
    forget(url)                                                 # for every later caller

The scheme picks the resolver: ``iris`` reads a cluster's endpoint registry (a local state
folder by default, or a shared location from ``$MARIN_CLUSTERS`` or ``?root=URL``), and
``http`` (or no scheme) is a direct ``host:port``. A third party adds a scheme with an entry
point in the ``marin.resolvers`` group: a class (built with no arguments) or an object with a
``resolve(url) -> Target`` method. Results are cached per URL; clients call again with
``refresh=True`` when a call fails, so a service restarted on a new port is found again.
"""

from __future__ import annotations

import inspect
import os
import threading
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from marin import registry
from marin.services.endpoints import TOKEN_ENV, EndpointRegistry, TokenFileError

registry.declare_group("marin.resolvers", expected="a class or object with a resolve(url) method",
                       fits=registry.has_methods("resolve"))


class ResolutionError(LookupError):
    """A URL names no reachable service; the message says what to check."""


@dataclass(frozen=True)
class Target:
    """Where to call: ``address`` is ``host:port``; ``token`` authenticates off loopback."""

    address: str
    token: str | None = None


class IrisResolver:
    """``iris://CLUSTER?endpoint=/system/logger[&root=gs://bucket/.marin/clusters]``."""

    def resolve(self, url: str) -> Target:
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        cluster = parts.netloc
        endpoint = (query.get("endpoint") or [""])[0]
        if not cluster or not endpoint:
            raise ResolutionError(f"bad service URL {url!r}: expected "
                                  "iris://CLUSTER?endpoint=/system/logger")
        reg = EndpointRegistry.for_cluster(cluster, (query.get("root") or [None])[0])
        found = reg.lookup(endpoint)
        if found is None:
            raise ResolutionError(
                f"no endpoint {endpoint} registered for cluster {cluster!r} in {reg.url}; "
                f"start the services with `marin services up --cluster {cluster}` (or set "
                "$MARIN_CLUSTERS to the shared registry)")
        try:
            return Target(found.address, reg.read_token())
        except TokenFileError as e:
            raise ResolutionError(str(e)) from None


class DirectResolver:
    """``http://host:port`` or ``host:port``; the token comes from $MARIN_SERVICES_TOKEN."""

    def resolve(self, url: str) -> Target:
        rest = url.split("://", 1)[1] if "://" in url else url
        address = rest.split("/", 1)[0].split("?", 1)[0]
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ResolutionError(f"bad service address {url!r}: expected host:port, "
                                  "http://host:port or iris://CLUSTER?endpoint=NAME")
        return Target(address, os.environ.get(TOKEN_ENV) or None)


_cache: dict[str, Target] = {}
_lock = threading.Lock()


def resolver_for(url: str):
    """The resolver object of a URL's scheme (raises ResolutionError if none is installed)."""
    if "://" not in url:
        return DirectResolver()
    scheme = url.split("://", 1)[0].lower()
    try:
        plugin = registry.load("resolvers", scheme)
    except registry.PluginError as e:
        raise ResolutionError(f"cannot resolve {url!r}: {e}") from None
    return plugin() if inspect.isclass(plugin) else plugin


def forget(url: str) -> None:
    """Drop the cached target of ``url`` (a call to it failed as if the service moved), so
    that every channel of this process resolves it again."""
    with _lock:
        _cache.pop(url, None)


def resolve(url: str, refresh: bool = False) -> Target:
    if not refresh:
        with _lock:
            if url in _cache:
                return _cache[url]
    target = resolver_for(url).resolve(url)
    if not isinstance(target, Target):
        target = Target(str(target))
    with _lock:
        _cache[url] = target
    return target
