"""Durable key-value storage with versions: SQLite in WAL mode, one commit per change.

    kv = KVStore("/data/kv/kv.sqlite")
    item = kv.put("steps/exec-1/train", b'{"state": "running"}')        # version 1
    kv.put("steps/exec-1/train", b"...", expected_version=1)           # compare-and-swap
    kv.get("steps/exec-1/train").version                               # 2
    kv.list("steps/")                                                  # by prefix, sorted

Every change returns after its commit. A put or delete with ``expected_version`` succeeds
only if the key's current version is that number (0: the key must not exist).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from marin.services.log_service.store import connect

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL,
    version INTEGER NOT NULL,
    updated REAL NOT NULL
) WITHOUT ROWID;
"""


_MAX_CHAR = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


def successor(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix`` (None: no bound).

    SQLite compares keys as UTF-8 bytes, which orders them by code point, as Python does.
    The last character that is not U+10FFFF goes up by one, skipping the surrogates
    (they have no UTF-8 form)."""
    head = prefix.rstrip(chr(_MAX_CHAR))
    if not head:
        return None
    up = ord(head[-1]) + 1
    return head[:-1] + chr(_SURROGATES.stop if up in _SURROGATES else up)


@dataclass(frozen=True)
class Item:
    key: str
    value: bytes
    version: int
    updated: float


class KVStore:
    def __init__(self, path: str, synchronous: str = "full"):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self._conn = connect(path, synchronous)
        self._conn.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def get(self, key: str) -> Item | None:
        with self._lock:
            row = self._conn.execute("SELECT key, value, version, updated FROM kv WHERE key = ?",
                                     (key,)).fetchone()
        return Item(*row) if row else None

    def put(self, key: str, value: bytes, expected_version: int | None = None
            ) -> tuple[bool, Item | None]:
        """(True, new item), or (False, current item or None) when the version differs."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute("SELECT key, value, version, updated FROM kv "
                                         "WHERE key = ?", (key,)).fetchone()
                current = Item(*row) if row else None
                if expected_version is not None and (current.version if current else 0) \
                        != expected_version:
                    self._conn.execute("ROLLBACK")
                    return False, current
                item = Item(key, bytes(value), (current.version if current else 0) + 1,
                            time.time())
                self._conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?, ?)",
                                   (item.key, item.value, item.version, item.updated))
                self._conn.execute("COMMIT")
                return True, item
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def delete(self, key: str, expected_version: int | None = None) -> tuple[bool, bool]:
        """(deleted, existed)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute("SELECT version FROM kv WHERE key = ?",
                                         (key,)).fetchone()
                if expected_version is not None and (row[0] if row else 0) != expected_version:
                    self._conn.execute("ROLLBACK")
                    return False, row is not None
                self._conn.execute("DELETE FROM kv WHERE key = ?", (key,))
                self._conn.execute("COMMIT")
                return row is not None, row is not None
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def list(self, prefix: str = "", limit: int = 1000, start_after: str = ""
             ) -> tuple[list[Item], bool]:
        """Items whose key starts with ``prefix``, sorted by key; and whether more remain."""
        # A range scan on the primary key; the upper bound is the prefix's successor.
        lo = max(prefix, start_after)
        params: list = [lo]
        sql = "SELECT key, value, version, updated FROM kv WHERE key > ?" if start_after \
            and start_after >= prefix else "SELECT key, value, version, updated FROM kv " \
            "WHERE key >= ?"
        bound = successor(prefix)
        if bound is not None:
            sql += " AND key < ?"
            params.append(bound)
        sql += " ORDER BY key LIMIT ?"
        params.append(limit + 1)
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [Item(*r) for r in rows[:limit]], len(rows) > limit

    def count(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT count(*) FROM kv").fetchone()[0]

    def db_bytes(self) -> int:
        return sum(os.path.getsize(p) for p in (self.path, self.path + "-wal")
                   if os.path.exists(p))

    def close(self) -> None:
        with self._lock:
            self._conn.close()
