"""Where marin keeps what it can recompute (converted tokenizer files, flag probes, hashes).

    cache_dir() / "xla_flags.json"     # $MARIN_CACHE_DIR, else ~/.cache/marin
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """``$MARIN_CACHE_DIR``, else ``~/.cache/marin`` (read on each call, so tests may set it)."""
    return Path(os.environ.get("MARIN_CACHE_DIR") or Path.home() / ".cache" / "marin")
