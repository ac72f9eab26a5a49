"""Typed fields read out of a JSON record written by another version, by hand, or damaged.

    check = FieldReader("invocation record x.json", data)
    started = check.time("started")          # a float, or None (and a problem noted)
    check.problems                           # ["invocation record x.json: 'started' is ..."]

Design note: a record is read by pages and by ``marin gc`` long after it was written, so
no reader may raise on one bad field. Each accessor returns the typed value or None (an
empty value for collections), and a field of the wrong type is named in ``problems``.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["FieldReader", "finite_number", "loads", "shown", "valid_time"]

#: Epoch seconds a page can show: from 1970 to the end of year 9999.
_LAST_TIME = 253_402_300_799.0
_SHOWN = 60  # characters of a bad value quoted in a problem


def loads(raw: bytes | str) -> Any:
    """``json.loads``, with nesting too deep for the parser reported as a ValueError."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite JSON number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) else None


def valid_time(value: Any) -> float | None:
    """``value`` when it is epoch seconds a calendar can show, else None."""
    number = finite_number(value)
    return number if number is not None and 0 <= number <= _LAST_TIME else None


def shown(value: Any) -> str:
    """``repr(value)``, cut short enough to quote in a one-line problem."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


class FieldReader:
    """Reads typed fields out of a JSON object, noting each one it has to ignore."""

    def __init__(self, what: str, data: dict[str, Any]):
        self.what = what
        self.data = data
        self.problems: list[str] = []

    def _bad(self, name: str, expected: str) -> None:
        self.problems.append(f"{self.what}: '{name}' is not {expected} "
                             f"({shown(self.data[name])}); ignored")

    def text(self, name: str) -> str | None:
        value = self.data.get(name)
        if value is None or isinstance(value, str):
            return value
        self._bad(name, "text")
        return None

    def time(self, name: str) -> float | None:
        value = self.data.get(name)
        if value is None:
            return None
        number = valid_time(value)
        if number is None:
            self._bad(name, "a time in epoch seconds")
        return number

    def number(self, name: str) -> float | None:
        value = self.data.get(name)
        number = finite_number(value)
        if value is not None and number is None:
            self._bad(name, "a finite number")
        return number

    def integer(self, name: str) -> int | None:
        value = self.data.get(name)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        self._bad(name, "an integer")
        return None

    def texts(self, name: str) -> tuple[str, ...]:
        value = self.data.get(name)
        if value is None:
            return ()
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        self._bad(name, "a list of text")
        return ()

    def counts(self, name: str) -> dict[str, int]:
        value = self.data.get(name)
        if value is None:
            return {}
        if isinstance(value, dict) and all(isinstance(n, int) and not isinstance(n, bool)
                                           for n in value.values()):
            return dict(value)
        self._bad(name, "counts by outcome")
        return {}
