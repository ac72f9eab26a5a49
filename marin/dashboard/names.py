"""Names that are not UTF-8 (a file or step folder named with bytes like ``b"\\xff"``) on the
dashboard's pages, in its links and in the requests those links make.

    shown("bad\\udcff.txt")            # 'bad\\\\xff.txt': what a page prints of the name
    url_part("bad\\udcff.txt")         # 'bad%FF.txt': a link that names the same bytes
    query_param(request, "path")       # 'bad\\udcff.txt' again, from ?path=bad%FF.txt

Python lists such names with each undecodable byte as a lone surrogate
(``surrogateescape``), which UTF-8 cannot encode: a page holding one cannot be sent, and
``quote`` refuses it. Pages print the name with each such byte as ``\\xNN``; links
percent-encode the original bytes; and a request's path and query are decoded from their raw
bytes the same way the listing was, so the link leads back to the very file.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, quote, unquote

from markupsafe import Markup
from starlette.requests import Request

__all__ = ["path_tail", "query_param", "query_params", "shown", "shown_json", "url_part"]

_ESCAPE = "surrogateescape"


def _has_surrogates(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def shown(value: Any) -> Any:
    """``value`` as a page may print it: a string's undecodable bytes as ``\\xNN`` (any
    other lone surrogate as ``\\udNNN``); anything else as it is."""
    if not isinstance(value, str) or not _has_surrogates(value):
        return value
    text = value.encode("utf-8", _ESCAPE).decode("utf-8", "backslashreplace") \
        if _encodable(value) else value.encode("utf-8", "backslashreplace").decode()
    return Markup(text) if isinstance(value, Markup) else text


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8", _ESCAPE)
    except UnicodeEncodeError:  # a surrogate that stands for no byte (U+D800...)
        return False
    return True


def shown_json(value: Any) -> Any:
    """``shown`` applied to every string of a JSON value, keys included."""
    if isinstance(value, dict):
        return {shown_json(k): shown_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [shown_json(v) for v in value]
    return shown(value)


def url_part(value: Any, safe: str = "") -> str:
    """``value`` percent-encoded for a URL, undecodable bytes as the bytes they were."""
    text = str(value)
    return quote(text.encode("utf-8", _ESCAPE) if _encodable(text) else
                 text.encode("utf-8", "backslashreplace"), safe=safe)


def path_tail(request: Request, head: str) -> str:
    """The request's path after ``head`` (``/steps/``), decoded as listings decode names."""
    raw = request.scope.get("raw_path")
    if not raw:
        return request.url.path[len(head):]
    path = raw.decode("latin-1").split("?", 1)[0]
    return unquote(path[len(head):], errors=_ESCAPE)


def query_params(request: Request, name: str) -> list[str]:
    """Every value of ``name`` in the request's query, decoded as listings decode names."""
    raw = request.scope.get("query_string", b"").decode("latin-1")
    return [v for k, v in parse_qsl(raw, keep_blank_values=True, errors=_ESCAPE) if k == name]


def query_param(request: Request, name: str, default: str | None = None) -> str | None:
    """The first value of ``name`` in the query (``default`` when absent)."""
    found = query_params(request, name)
    return found[0] if found else default
