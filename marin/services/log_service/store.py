"""Durable log storage: SQLite in WAL mode, written by one thread in group commits.

    store = LogStore("/data/logger/logs.sqlite")
    duplicate = store.append(rows, client="c1", seq=7)   # returns after the commit
    rows = store.query(LogQuery(run="r1", min_level=30, grep="nan"))
    for row in store.scan(LogQuery(run="r1", newest=True, limit=500)): ...  # lazily
    store.prune(older_than=time.time() - 7 * 86400)

Design note: every ``append`` call hands its rows to a single writer thread and waits.
The writer takes everything queued, inserts it in one transaction, commits, then wakes all
the callers at once, so N concurrent batches cost one commit (and one fsync) instead of N,
and an acknowledgement always follows a commit. ``(client, seq)`` of each batch is stored
in the same transaction, which makes a retried batch (its first acknowledgement lost to a
crash) a no-op instead of a duplicate. Batches are checked before they join a group
(``InvalidBatchError``); should a group's commit still fail, each of its batches is
committed alone, so one batch's failure is never another caller's.

The ``logs`` table has no index besides its id: an index entry per row cost about as much
as the row itself. Instead each commit updates one ``spans`` row per run it touched: the
id range and timestamp range that run wrote in, a span staying open for ``SPAN_SECONDS``.
A query by run or time reads the matching spans and scans only their id ranges (rows of
other runs written in the same minutes are scanned and filtered out).
"""

from __future__ import annotations

import operator
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

# (timestamp, level number, run, step or None, source, msg, extra JSON or None)
Row = tuple[float, int, str, int | None, str, str, str | None]

LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}
LEVEL_NAMES = {v: k for k, v in LEVELS.items()}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS logs (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    level INTEGER NOT NULL,
    run TEXT NOT NULL,
    step INTEGER,
    source TEXT NOT NULL,
    msg TEXT NOT NULL,
    extra TEXT
);
CREATE TABLE IF NOT EXISTS spans (
    run TEXT NOT NULL,
    first_id INTEGER NOT NULL,
    last_id INTEGER NOT NULL,
    min_ts REAL NOT NULL,
    max_ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS spans_run ON spans (run, first_id);
CREATE INDEX IF NOT EXISTS spans_ts ON spans (max_ts);
CREATE TABLE IF NOT EXISTS batches (
    client TEXT NOT NULL,
    seq INTEGER NOT NULL,
    committed REAL NOT NULL,
    PRIMARY KEY (client, seq)
) WITHOUT ROWID;
"""
_INSERT = ("INSERT INTO logs (ts, level, run, step, source, msg, extra) "
           "VALUES (?, ?, ?, ?, ?, ?, ?)")
_MAX_GROUP_ROWS = 200_000
MAX_INT = 2**63 - 1  # SQLite's largest INTEGER
MAX_CLIENT_CHARS = 128
SPAN_SECONDS = 60.0
_ts, _run = operator.itemgetter(0), operator.itemgetter(2)


@dataclass(frozen=True)
class LogQuery:
    """Filters, all optional: ``run``, ``step``, ``min_level`` (a number, 20 for INFO),
    ``since``/``until`` (epoch seconds, ``until`` exclusive), ``grep`` (substring of the
    message), ``after_id`` (for following), ``limit``, and ``newest`` (the last ``limit``
    matches rather than the first)."""

    run: str | None = None
    step: int | None = None
    min_level: int = 0
    since: float | None = None
    until: float | None = None
    grep: str | None = None
    after_id: int = 0
    limit: int = 1000
    newest: bool = False


def _touch(touched: dict[str, tuple[int, int, float, float]], rows: list[Row],
           first_id: int) -> None:
    """Add ``rows`` (ids from ``first_id``) to the id and time ranges of their runs. A batch
    of several runs counts whole for each (a wider range to scan, never a missed row)."""
    last_id = first_id + len(rows) - 1
    stamps = list(map(_ts, rows))
    lo, hi = min(stamps), max(stamps)
    for run in set(map(_run, rows)):
        seen = touched.get(run)
        touched[run] = (first_id, last_id, lo, hi) if seen is None else (
            seen[0], last_id, min(lo, seen[2]), max(hi, seen[3]))


def _filters(q: LogQuery) -> tuple[list[str], list]:
    """SQL conditions (parameterised) and their parameters for a query's filters."""
    where, params = [], []
    for sql, value in (("run = ?", q.run or None), ("step = ?", q.step),
                       ("level >= ?", q.min_level or None), ("ts >= ?", q.since or None),
                       ("ts < ?", q.until or None), ("instr(msg, ?) > 0", q.grep or None)):
        if value is not None:
            where.append(sql)
            params.append(value)
    return where, params


def _window(conn: sqlite3.Connection, ranges: list[tuple[int, int]], where: list[str],
            params: list, limit: int) -> list[tuple[int, int]]:
    """``ranges`` cut to the ids of the last ``limit`` matching rows."""
    sql = (f"SELECT id FROM logs WHERE {' AND '.join(['id BETWEEN ? AND ?', *where])} "
           "ORDER BY id DESC LIMIT ?")
    ids: list[int] = []
    for lo, hi in reversed(ranges):
        ids += (r[0] for r in conn.execute(sql, (lo, hi, *params, limit - len(ids))))
        if len(ids) >= limit:
            break
    if not ids:
        return []
    first, last = ids[-1], ids[0]
    return [(max(lo, first), min(hi, last)) for lo, hi in ranges if hi >= first and lo <= last]


class StoreClosedError(RuntimeError):
    pass


class InvalidBatchError(ValueError):
    """A batch's ``(client, seq)`` the store cannot hold; nothing of it was stored."""


def check_batch_id(client: str, seq: int) -> None:
    if len(client) > MAX_CLIENT_CHARS:
        raise InvalidBatchError(f"client_id of {len(client)} characters exceeds the cap of "
                                f"{MAX_CLIENT_CHARS}; use a short id such as a uuid")
    if not 0 <= seq <= MAX_INT:
        raise InvalidBatchError(f"seq {seq} is outside 0..2**63-1; number batches from 1")


class _Pending:
    __slots__ = ("client", "done", "duplicate", "error", "rows", "seq")

    def __init__(self, rows: list[Row], client: str, seq: int):
        self.rows, self.client, self.seq = rows, client, seq
        self.done = threading.Event()
        self.duplicate = False
        self.error: BaseException | None = None


def connect(path: str, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={'FULL' if synchronous == 'full' else 'NORMAL'}")
    conn.execute("PRAGMA busy_timeout=10000")
    return conn


class LogStore:
    """``synchronous``: "full" (an fsync per commit: acknowledged entries survive power
    loss) or "normal" (they survive a crash of the service, not of the machine)."""

    def __init__(self, path: str, synchronous: str = "full"):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self._synchronous = synchronous
        self._conn = connect(path, synchronous)
        self._conn.executescript(_SCHEMA)
        self._migrate()
        # run -> (spans rowid, opened at) of the span the next commit extends
        self._open: dict[str, tuple[int, float]] = {}
        self.count = self._conn.execute("SELECT count(*) FROM logs").fetchone()[0]
        self.batches = 0
        self._count_lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._local = threading.local()
        self._closed = False
        self._writer = threading.Thread(target=self._write_loop, name="logstore-writer",
                                        daemon=True)
        self._writer.start()

    def append(self, rows: list[Row], client: str = "", seq: int = 0) -> bool:
        """Store ``rows`` durably; True when ``(client, seq)`` was already committed.
        ``InvalidBatchError`` for a ``(client, seq)`` out of range (see ``check_batch_id``)."""
        check_batch_id(client, seq)
        if self._closed:
            raise StoreClosedError("the log store is closed")
        pending = _Pending(rows, client, seq)
        self._queue.put(pending)
        pending.done.wait()
        if pending.error is not None:
            raise pending.error
        return pending.duplicate

    def _write_loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            group, rows = [first], len(first.rows)
            stop = False
            while rows < _MAX_GROUP_ROWS:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                group.append(item)
                rows += len(item.rows)
            if not self._commit(group) and len(group) > 1:
                for pending in group:  # find the batch that failed: each alone
                    self._commit([pending])
            for pending in group:
                pending.done.set()
            if stop:
                return

    def _migrate(self) -> None:
        """Give a database written before spans existed one span per run, and drop its
        per-row indexes."""
        conn = self._conn
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'logs_run_step'").fetchone():
            with conn:
                conn.execute("INSERT INTO spans SELECT run, min(id), max(id), min(ts), max(ts) "
                             "FROM logs GROUP BY run")
                conn.execute("DROP INDEX logs_run_step")
                conn.execute("DROP INDEX IF EXISTS logs_ts")

    def _commit(self, group: list[_Pending]) -> bool:
        """Commit ``group`` in one transaction; False (each caller's error set) if it failed.
        The callers are woken by ``_write_loop``."""
        conn = self._conn
        added = 0
        try:
            conn.execute("BEGIN IMMEDIATE")
            now = time.time()
            next_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM logs").fetchone()[0]
            touched: dict[str, tuple[int, int, float, float]] = {}
            for p in group:
                if p.client:
                    cur = conn.execute("INSERT OR IGNORE INTO batches VALUES (?, ?, ?)",
                                       (p.client, p.seq, now))
                    if cur.rowcount == 0:
                        p.duplicate = True
                        continue
                if not p.rows:
                    continue
                conn.executemany(_INSERT, p.rows)
                _touch(touched, p.rows, next_id)
                next_id += len(p.rows)
                added += len(p.rows)
            opened = self._spans(touched, now)
            conn.execute("COMMIT")
            self._open.update(opened)
            with self._count_lock:
                self.count += added
            self.batches += sum(not p.duplicate for p in group)
            for p in group:
                p.error = None
            return True
        except BaseException as e:  # a disk error fails this group's calls, not the service
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._open.clear()  # a rolled-back span insert leaves no row to extend
            for p in group:
                p.error, p.duplicate = e, False
            return False

    def _spans(self, touched: dict[str, tuple[int, int, float, float]], now: float
               ) -> dict[str, tuple[int, float]]:
        """Extend each touched run's open span, or open a new one; the open spans to keep
        once the transaction commits."""
        conn, opened = self._conn, {}
        for run, (first, last, lo, hi) in touched.items():
            span = self._open.get(run)
            if span is not None and now - span[1] < SPAN_SECONDS and conn.execute(
                    "UPDATE spans SET last_id = ?, min_ts = min(min_ts, ?), max_ts = "
                    "max(max_ts, ?) WHERE rowid = ?", (last, lo, hi, span[0])).rowcount:
                rowid, since = span[0], span[1]  # (a span pruned meanwhile: open anew)
            else:
                rowid = conn.execute("INSERT INTO spans VALUES (?, ?, ?, ?, ?)",
                                     (run, first, last, lo, hi)).lastrowid
                since = now
            opened[run] = (rowid, since)
        if len(self._open) > 10_000:  # forget spans that will not be extended
            self._open = {r: s for r, s in self._open.items() if now - s[1] < SPAN_SECONDS}
        return opened

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = connect(self.path, self._synchronous)
        return conn

    def query(self, q: LogQuery) -> list[tuple]:
        """Matching rows as (id, ts, level, run, step, source, msg, extra), oldest first."""
        return list(self.scan(q))

    def scan(self, q: LogQuery) -> Iterator[tuple]:
        """The rows of ``query``, read from the database as they are consumed: memory stays
        bounded however many rows match. For ``newest`` the ids are read first (newest
        first, ids only) to find where the last ``limit`` matches begin."""
        if q.after_id >= MAX_INT:
            return
        where, params = _filters(q)
        conn, limit = self._reader(), max(1, q.limit)
        ranges = self._ranges(conn, q)
        if q.newest:
            ranges = _window(conn, ranges, where, params, limit)
        sql = (f"SELECT id, ts, level, run, step, source, msg, extra FROM logs WHERE "
               f"{' AND '.join(['id BETWEEN ? AND ?', *where])} ORDER BY id LIMIT ?")
        seen = 0
        for lo, hi in ranges:
            for row in conn.execute(sql, (lo, hi, *params, limit - seen)):
                seen += 1
                yield row
            if seen >= limit:
                return

    @staticmethod
    def _ranges(conn: sqlite3.Connection, q: LogQuery) -> list[tuple[int, int]]:
        """Id ranges, ascending and disjoint, that hold every row the query can match."""
        start = max(0, q.after_id) + 1
        if not (q.run or q.since or q.until):
            return [(start, MAX_INT)]
        where, params = ["last_id >= ?"], [start]
        if q.run:
            where.append("run = ?")
            params.append(q.run)
        if q.since:
            where.append("max_ts >= ?")
            params.append(q.since)
        if q.until:
            where.append("min_ts < ?")
            params.append(q.until)
        spans = conn.execute(f"SELECT max(first_id, ?), last_id FROM spans WHERE "
                             f"{' AND '.join(where)} ORDER BY first_id", (start, *params))
        ranges: list[tuple[int, int]] = []
        for lo, hi in spans:
            if ranges and lo <= ranges[-1][1] + 1:
                ranges[-1] = (ranges[-1][0], max(hi, ranges[-1][1]))
            else:
                ranges.append((lo, hi))
        return ranges

    def prune(self, older_than: float, dedup_window: float = 86400.0) -> int:
        """Delete entries with a timestamp before ``older_than``, in chunks; returns how many.

        Runs on its own connection: SQLite serializes it with the writer's commits."""
        conn = connect(self.path, self._synchronous)
        deleted = 0
        try:
            # Every row lies in a span: none older than the cutoff lies past this id.
            bound = conn.execute("SELECT coalesce(max(last_id), 0) FROM spans "
                                 "WHERE min_ts < ?", (older_than,)).fetchone()[0]
            while bound:
                with conn:
                    n = conn.execute("DELETE FROM logs WHERE id IN (SELECT id FROM logs "
                                     "WHERE id <= ? AND ts < ? LIMIT 20000)",
                                     (bound, older_than)).rowcount
                with self._count_lock:
                    self.count -= n
                deleted += n
                if n < 20000:
                    break
            with conn:
                conn.execute("DELETE FROM spans WHERE max_ts < ? AND last_id <= ?",
                             (older_than, bound))
                conn.execute("DELETE FROM batches WHERE committed < ?",
                             (time.time() - dedup_window,))
        finally:
            conn.close()
        return deleted

    def db_bytes(self) -> int:
        return sum(os.path.getsize(p) for p in (self.path, self.path + "-wal")
                   if os.path.exists(p))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._writer.join()
        self._conn.close()
