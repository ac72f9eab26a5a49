"""An exception as one line, for messages, records and tables.

    one_line(ValueError("bad value\n  in x.yaml"))                  # "bad value in x.yaml"
    one_line(KeyError("k"), with_type=True)                         # "KeyError: 'k'"
"""

from __future__ import annotations

__all__ = ["one_line"]


def one_line(e: BaseException, with_type: bool = False) -> str:
    """The message's non-empty lines joined by spaces (the type's name when it has none);
    ``with_type`` puts the type's name first."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    text = " ".join(lines)
    return f"{type(e).__name__}: {text}" if with_type else text
