"""Progress of a tokenize run: a bar on a terminal, a line every few seconds otherwise, and
one summary line at the end.

    progress = TokenizeProgress(total_bytes=20_000_000, units=40, reused=3)
    progress.advance(unit, record)      # as units finish
    progress.tick()                     # between them: the bar redraws, or a line is due
    progress.close(); progress.summary(ledger_record, cache_path)

The bar shows documents, tokens, tokens per second and the time left (from the input
bytes still to read); it is drawn on standard error when that is a terminal, and cleared
when the run ends. Elsewhere (logs, CI) a line goes to the ``marin.tokenize`` logger every
``interval`` seconds.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from marin.processing.tokenize.ranges import Unit
from marin.processing.tokenize.records import LedgerRecord, ShardRecord

__all__ = ["TokenizeProgress"]

logger = logging.getLogger("marin.tokenize")


class TokenizeProgress:
    def __init__(self, total_bytes: int, units: int | None, reused: int, interval: float = 10.0,
                 terminal: bool | None = None):
        self.total_bytes = max(1, total_bytes)
        self.units, self.reused, self.interval = units, reused, interval
        self.done_bytes = self.documents = self.tokens = self.built = 0
        self.started = self._last_line = time.monotonic()
        self._bar: Any = None
        if sys.stderr.isatty() if terminal is None else terminal:
            self._bar, self._task = _bar(self.total_bytes)

    def advance(self, unit: Unit, record: ShardRecord) -> None:
        self.built += 1
        self.done_bytes += unit.weight
        self.documents += record.documents
        self.tokens += record.tokens
        self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        if self._bar is not None:
            self._bar.update(self._task, completed=min(self.done_bytes, self.total_bytes),
                             documents=f"{self.documents:,}", tokens=_millions(self.tokens),
                             rate=_millions(self.tokens / max(now - self.started, 1e-9)))
        elif now - self._last_line >= self.interval:
            self._last_line = now
            logger.info("tokenizing: %s", self.status(now))

    def status(self, now: float) -> str:
        elapsed = max(now - self.started, 1e-9)
        share = min(self.done_bytes / self.total_bytes, 1.0)
        left = elapsed * (1 - share) / share if share else None
        of = f"/{self.units}" if self.units is not None else ""
        return (f"{share:.0%} of {self.total_bytes / 1e6:,.1f} MB, {self.built}{of} units, "
                f"{self.documents:,} documents, {_millions(self.tokens)} tokens, "
                f"{_millions(self.tokens / elapsed)} tok/s"
                + (f", about {left:.0f} s left" if left is not None else ""))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def summary(self, record: LedgerRecord, cache_path: str) -> str:
        """The one line that ends the run (logged at INFO, with a warning on its own line
        for replaced bytes or empty documents)."""
        seconds = time.monotonic() - self.started
        parts = [f"{split} {t.documents:,} documents, {_millions(t.tokens)} tokens"
                 for split, t in record.totals.items()]
        line = (f"tokenized {cache_path}: {'; '.join(parts) or 'no documents'}; "
                f"{_units(self.built)} built, {self.reused} reused, in {seconds:.1f} s "
                f"({_millions(self.tokens / max(seconds, 1e-9))} tok/s)")
        logger.info("%s", line)
        for split, t in record.totals.items():
            if t.replaced_bytes:
                logger.warning("%s: %d undecodable byte(s) replaced with U+FFFD; see the "
                               "ledger's replaced_bytes per shard", split, t.replaced_bytes)
            if t.empty_documents:
                logger.warning("%s: %d empty document(s) skipped", split, t.empty_documents)
        return line


def _units(count: int) -> str:
    return f"{count} unit" + ("" if count == 1 else "s")


def _millions(count: float) -> str:
    return f"{count / 1e6:.2f} M" if count >= 1e5 else f"{count:,.0f}"


def _bar(total: int) -> tuple[Any, Any]:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("tokenize"), BarColumn(),
                   TextColumn("{task.fields[documents]} docs"),
                   TextColumn("{task.fields[tokens]} tokens"),
                   TextColumn("{task.fields[rate]} tok/s"), TimeRemainingColumn(),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task("tokenize", total=total, documents="0", tokens="0", rate="0")
    bar.start()
    return bar, task
