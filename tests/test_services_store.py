"""The services' storage, wire format, resolvers and client-side validation, in process."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from marin import registry
from marin.services import codec
from marin.services.endpoints import Endpoint, EndpointRegistry
from marin.services.kv_service.store import KVStore
from marin.services.log_service.client import InvalidLogEntryError, LogEntry, validate
from marin.services.log_service.store import LEVELS, LogQuery, LogStore
from marin.services.resolve import ResolutionError, Target, resolve
from tests.conftest import ROOT
from tests.services_util import wait_until


def _rows(n: int, seed: int = 0) -> list[tuple]:
    rng = random.Random(seed)
    names = list(LEVELS.values())
    return [(1000.0 + i, rng.choice(names), f"run{rng.randrange(3)}",
             rng.choice([None, rng.randrange(5)]), "src", f"message {i} {rng.choice('abc')}",
             None) for i in range(n)]


def test_generated_protobuf_modules_match_the_proto():
    result = subprocess.run([sys.executable, "-m", "marin.services.proto.generate", "--check"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_queries_match_a_plain_filter_over_the_same_rows(tmp_path):
    store = LogStore(str(tmp_path / "logs.sqlite"))
    rows = _rows(500)
    for i in range(0, 500, 100):
        store.append(rows[i:i + 100], "c", i)
    with_ids = [(i + 1, *r) for i, r in enumerate(rows)]  # ids follow arrival order

    def expect(pred):
        return [(rid, ts, lvl, run, step, src, msg, extra)
                for rid, ts, lvl, run, step, src, msg, extra in with_ids
                if pred(ts, lvl, run, step, msg)]

    cases = [
        (LogQuery(run="run1", limit=10_000), lambda ts, lvl, run, s, m: run == "run1"),
        (LogQuery(run="run2", step=3, limit=10_000),
         lambda ts, lvl, run, s, m: run == "run2" and s == 3),
        (LogQuery(min_level=40, limit=10_000), lambda ts, lvl, run, s, m: lvl >= 40),
        (LogQuery(since=1100, until=1200, limit=10_000),
         lambda ts, lvl, run, s, m: 1100 <= ts < 1200),
        (LogQuery(grep=" b", limit=10_000), lambda ts, lvl, run, s, m: " b" in m),
        (LogQuery(run="run0", grep="c", min_level=20, since=1050, limit=10_000),
         lambda ts, lvl, run, s, m: run == "run0" and "c" in m and lvl >= 20 and ts >= 1050),
    ]
    for query, pred in cases:
        assert store.query(query) == expect(pred), query
    newest = store.query(LogQuery(limit=7, newest=True))
    assert [r[0] for r in newest] == list(range(494, 501))
    assert [r[0] for r in store.query(LogQuery(after_id=495))] == list(range(496, 501))
    store.close()


def test_a_batch_sent_twice_is_stored_once_and_a_query_cannot_inject_sql(tmp_path):
    store = LogStore(str(tmp_path / "logs.sqlite"))
    rows = _rows(10)
    assert store.append(rows, "client-a", 1) is False
    assert store.append(rows, "client-a", 1) is True  # the retry after a lost ack
    assert store.append(rows, "client-b", 1) is False
    assert store.count == 20
    hostile = LogQuery(run="x' OR '1'='1", grep="'); DROP TABLE logs; --", limit=100)
    assert store.query(hostile) == []
    assert len(store.query(LogQuery(limit=100))) == 20
    store.close()
    reopened = LogStore(str(tmp_path / "logs.sqlite"))
    assert reopened.count == 20
    reopened.close()


def test_retention_deletes_only_entries_older_than_the_cutoff(tmp_path):
    store = LogStore(str(tmp_path / "logs.sqlite"))
    store.append(_rows(300))
    assert store.prune(older_than=1100.0) == 100
    left = store.query(LogQuery(limit=1000))
    assert len(left) == 200 and min(r[1] for r in left) == 1100.0
    assert store.count == 200
    store.close()


def test_kv_compare_and_swap_and_prefix_listing(tmp_path):
    kv = KVStore(str(tmp_path / "kv.sqlite"))
    ok, first = kv.put("a/1", b"x", expected_version=0)
    assert ok and first.version == 1
    ok, current = kv.put("a/1", b"y", expected_version=0)  # exists already
    assert not ok and current.value == b"x"
    ok, second = kv.put("a/1", b"y", expected_version=1)
    assert ok and second.version == 2 and kv.get("a/1").value == b"y"
    assert kv.delete("a/1", expected_version=1) == (False, True)
    keys = ["a/2", "a/10", "a/3", "ab", "b/1", "a0"]
    for k in keys:
        kv.put(k, k.encode())
    listed, more = kv.list("a/")
    assert [i.key for i in listed] == sorted(k for k in [*keys, "a/1"] if k.startswith("a/"))
    assert not more
    page, more = kv.list("a/", limit=2)
    rest, _ = kv.list("a/", start_after=page[-1].key)
    assert more and [i.key for i in page + rest] == [i.key for i in listed]
    assert kv.delete("a/1") == (True, True) and kv.get("a/1") is None
    kv.close()


def test_wire_batches_round_trip_and_reject_bombs_and_garbage():
    rows = [(1.5, "INFO", "m\u00e9", "r", None, "s", ""),
            (2.5, "ERROR", "x", "", 7, "", '{"a":1}')]
    cols = codec.decode(codec.encode(rows), max_bytes=1 << 20)
    back = list(zip(cols.timestamp, cols.level, cols.msg, cols.run,
                    [s if h else None for s, h in zip(cols.step, cols.has_step, strict=True)],
                    cols.source, cols.extra_json, strict=True))
    assert back == rows
    big = codec.encode([(1.0, "INFO", "z" * 100_000, "", None, "", "")])
    with pytest.raises(codec.PayloadError, match="exceeds the cap"):
        codec.decode(big, max_bytes=50_000)
    with pytest.raises(codec.PayloadError, match="not a zstd frame"):
        codec.decode(b"not zstd at all", max_bytes=1000)


def test_log_entries_validate_with_one_line_errors():
    rows = validate([{"level": "warn", "msg": "hi", "step": 3, "loss": 1.5},
                     LogEntry(msg="ok", level=40, run="r")])
    assert rows[0][1:] == ("WARNING", "hi", "", 3, "", '{"loss":1.5}')
    assert rows[1][1:4] == ("ERROR", "ok", "r")
    with pytest.raises(InvalidLogEntryError, match=r"entry 1, field 'level'") as info:
        validate([{"msg": "fine"}, {"level": "LOUD", "msg": "x"}])
    assert "\n" not in str(info.value)
    with pytest.raises(InvalidLogEntryError, match=r"entry 0, field 'msg'"):
        validate([{"level": "INFO"}])


def test_resolvers_are_plugins_and_iris_reads_the_registry(tmp_path, monkeypatch):
    assert {"iris", "http"} <= set(registry.names("resolvers"))
    monkeypatch.setenv("MARIN_CLUSTERS", str(tmp_path / "clusters"))
    url = "iris://c1?endpoint=/system/logger"
    with pytest.raises(ResolutionError, match="marin services up --cluster c1"):
        resolve(url, refresh=True)
    reg = EndpointRegistry.for_cluster("c1")
    reg.register(Endpoint("/system/logger", "127.0.0.1:1234", pid=1))
    assert resolve(url, refresh=True) == Target("127.0.0.1:1234")
    reg.register(Endpoint("/system/logger", "127.0.0.1:5678", pid=2))
    assert resolve(url) == Target("127.0.0.1:1234")  # cached
    assert resolve(url, refresh=True).address == "127.0.0.1:5678"
    assert resolve("http://10.1.2.3:80").address == "10.1.2.3:80"
    assert resolve("localhost:81").address == "localhost:81"
    with pytest.raises(ResolutionError, match=r"no marin\.resolvers plugin named 'nope'"):
        resolve("nope://x")
    with pytest.raises(ResolutionError, match="host:port"):
        resolve("http://no-port")


def test_the_token_file_is_readable_only_by_its_owner(tmp_path):
    reg = EndpointRegistry(str(tmp_path / "c"))
    token = reg.ensure_token()
    assert reg.ensure_token() == token
    assert (tmp_path / "c" / "token").stat().st_mode & 0o777 == 0o600
    assert reg.read_token() == token


def test_span_summaries_find_every_row_across_commits_runs_and_pruning(tmp_path, monkeypatch):
    import marin.services.log_service.store as logstore

    monkeypatch.setattr(logstore, "SPAN_SECONDS", 0.0)  # every commit opens new spans
    store = LogStore(str(tmp_path / "logs.sqlite"))
    rng = random.Random(1)
    rows = _rows(600, seed=1)
    # timestamps out of arrival order, as after a client's buffered backlog arrives late
    rows = [(1000.0 + rng.randrange(600), *r[1:]) for r in rows]
    for i in range(0, 300, 30):
        store.append(rows[i:i + 30], "c", i)
    monkeypatch.setattr(logstore, "SPAN_SECONDS", 3600.0)  # now commits extend spans
    for i in range(300, 600, 30):
        store.append(rows[i:i + 30], "c", i)
    reference = [(i + 1, *r) for i, r in enumerate(rows)]
    cases = [(LogQuery(run="run1", since=1200, until=1400, limit=10_000),
              lambda r: r[3] == "run1" and 1200 <= r[1] < 1400),
             (LogQuery(run="run2", step=4, after_id=100, limit=10_000),
              lambda r: r[3] == "run2" and r[4] == 4 and r[0] > 100),
             (LogQuery(since=1590, limit=10_000), lambda r: r[1] >= 1590),
             (LogQuery(run="run0", limit=7, newest=True), lambda r: r[3] == "run0")]
    for query, pred in cases:
        expected = [r for r in reference if pred(r)]
        if query.newest:
            expected = expected[-query.limit:]
        assert store.query(query) == expected, query
    assert store.prune(older_than=1300.0) == sum(r[1] < 1300 for r in reference)
    store.append([(1100.0, 20, "run1", None, "src", "late and old", None)], "c", 999)
    left = [r for r in reference if r[1] >= 1300]
    left.append((left[-1][0] + 1, 1100.0, 20, "run1", None, "src", "late and old", None))
    assert store.query(LogQuery(run="run1", limit=10_000)) == [r for r in left
                                                               if r[3] == "run1"]
    assert store.query(LogQuery(until=1301, limit=10_000)) == [r for r in left if r[1] < 1301]
    store.close()


def test_a_database_from_before_spans_is_migrated(tmp_path):
    import sqlite3

    path = str(tmp_path / "logs.sqlite")
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE logs (id INTEGER PRIMARY KEY, ts REAL NOT NULL, level "
                       "INTEGER NOT NULL, run TEXT NOT NULL, step INTEGER, source TEXT NOT "
                       "NULL, msg TEXT NOT NULL, extra TEXT);"
                       "CREATE INDEX logs_run_step ON logs (run, step);"
                       "CREATE INDEX logs_ts ON logs (ts);")
    conn.executemany("INSERT INTO logs (ts, level, run, step, source, msg, extra) VALUES "
                     "(?, ?, ?, ?, ?, ?, ?)", _rows(50))
    conn.commit()
    conn.close()
    store = LogStore(path)
    assert len(store.query(LogQuery(run="run1", limit=100))) == sum(
        r[2] == "run1" for r in _rows(50))
    names = {r[0] for r in store._reader().execute("SELECT name FROM sqlite_master")}
    assert "logs_run_step" not in names and "logs_ts" not in names
    store.close()


def test_buffered_entries_are_validated_like_push_batch_and_bad_ones_reported():
    from marin.services.log_service.entries import check_shape, to_columns

    now = 1.7e9
    plain = [{"msg": "a"}, {"level": "ERROR", "msg": "b", "run": "r", "step": 2,
                            "timestamp": 5.0, "source": "s"}]
    odd = [{"level": "warn", "msg": "c", "loss": 1.5}, LogEntry(msg="d", level=10),
           {"level": "LOUD", "msg": "e"}, {"msg": "f", "timestamp": float("nan")},
           {"msg": "g", "step": "three"}, {"msg": "x" * 70_000}, {"level": 30, "msg": "h"}]
    cols, invalid = to_columns([(plain, now), (odd, now)], run="dflt", source="src0")
    good = [e for e in plain + odd if e is not odd[2] and e is not odd[3] and
            e is not odd[4] and e is not odd[5]]
    expected = validate([e if isinstance(e, LogEntry) or "timestamp" in e
                         else {**e, "timestamp": now} for e in good], "dflt", "src0")
    assert [tuple(c[i] for c in cols) for i in range(len(cols.msg))] == expected
    assert [m.split(":")[0] for m in invalid] == ["entry 2, field 'level'",
                                                  "entry 3, field 'timestamp'",
                                                  "entry 4, field 'step'",
                                                  "entry 5, field 'msg'"]
    assert all("\n" not in m for m in invalid)
    assert check_shape(({"msg": "t"},)) == [{"msg": "t"}]
    for bad, message in (({"msg": "one"}, "wrap it in a list"), (5, "got int"),
                         ([{"msg": "ok"}, "text"], "entry 1: expected a dict")):
        with pytest.raises(InvalidLogEntryError, match=message):
            check_shape(bad)


def test_a_full_buffer_drops_the_oldest_entries_and_counts_them():
    from marin.services.log_service.client import LogClient

    # Nothing listens on port 1: the entries stay buffered (batch and linger keep the
    # sender from taking them before close).
    client = LogClient.connect("127.0.0.1:1", buffer_entries=250, batch_entries=10**6,
                               linger=60)
    for call in range(4):
        client.write_batch([{"msg": f"{call}:{i}"} for i in range(100)])
    assert client.stats()["dropped"] == 150 and client.buffered == 250
    assert [len(c) for c, _ in client._buffer] == [50, 100, 100]
    assert client._buffer[0][0][0]["msg"] == "1:50"  # the oldest left
    client.close(timeout=0.2)
    assert client.stats()["dropped"] == 400


def test_kv_prefix_listing_at_the_edges_of_unicode(tmp_path):
    from marin.services.kv_service.store import successor

    alphabet = ["a", "z", "\ud7ff", "\ue000", "\uffff", "\U0010fffe", "\U0010ffff"]
    rng = random.Random(3)
    keys = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 4)))
                   for _ in range(300)})
    kv = KVStore(str(tmp_path / "kv.sqlite"))
    for k in keys:
        kv.put(k, b"")
    prefixes = ["", *alphabet, *(a + b for a in alphabet for b in alphabet)]
    for prefix in prefixes:
        listed, more = kv.list(prefix, limit=1000)
        assert not more
        assert [i.key for i in listed] == [k for k in keys if k.startswith(prefix)], prefix
        bound = successor(prefix)
        assert bound is None or (bound > prefix and not bound.startswith(prefix))
        if bound is not None:
            bound.encode()  # a bound SQLite can take: no lone surrogate
    kv.close()


def test_a_failing_batch_in_a_group_commit_fails_alone(tmp_path):
    import sqlite3
    import threading

    from marin.services.log_service.store import InvalidBatchError

    store = LogStore(str(tmp_path / "logs.sqlite"))
    with pytest.raises(InvalidBatchError, match=r"seq 9223372036854775808 is outside"):
        store.append(_rows(1), "c", 2**63)
    with pytest.raises(InvalidBatchError, match="client_id of 200 characters"):
        store.append(_rows(1), "x" * 200, 1)
    # Hold the database so that the batches below queue up and are committed as one group.
    blocker = sqlite3.connect(str(tmp_path / "logs.sqlite"), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    first = threading.Thread(target=store.append, args=(_rows(3), "a", 1))
    first.start()
    wait_until(lambda: store._queue.empty(), what="the writer waiting on the held database")
    outcomes: dict[str, object] = {}

    def append(name: str, rows: list) -> None:
        try:
            outcomes[name] = store.append(rows, name, 1)
        except Exception as e:
            outcomes[name] = e

    broken = [(1.0, 20, "r", None, "s", None, None)]  # msg NULL: refused by the table
    threads = [threading.Thread(target=append, args=(name, rows)) for name, rows in
               (("good1", _rows(4)), ("bad", broken), ("good2", _rows(5)))]
    for t in threads:
        t.start()
    wait_until(lambda: store._queue.qsize() == 3, what="three batches queued")
    blocker.execute("COMMIT")
    blocker.close()
    for t in [first, *threads]:
        t.join()
    assert outcomes["good1"] is False and outcomes["good2"] is False
    assert isinstance(outcomes["bad"], sqlite3.IntegrityError)
    assert store.count == 12 and len(store.query(LogQuery(limit=100))) == 12
    assert store.query(LogQuery(after_id=2**63 - 1)) == []
    assert len(store.query(LogQuery(after_id=-5, limit=100))) == 12
    store.close()


def test_extra_fields_too_deep_or_odd_are_refused_per_entry():
    from marin.services.checks import Caps, check_extra, json_depth, rows_of

    caps = Caps(max_extra_depth=3)
    assert check_extra('{"a": [1, {"b": 2}]}', caps) is None
    roomy = Caps(max_extra_depth=3, max_extra_chars=1 << 20)
    for text, reason in (('{"a": [[{"b": 1}]]}', "deeper than 3"),
                         ("[" * 100_000 + "]" * 100_000, "deeper than 3"),
                         ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "deeper than 3"),
                         ("[1]", "must be a JSON object"), ("{", "not valid JSON")):
        field, message = check_extra(text, roomy)
        assert field == "extra" and reason in message, (text[:20], message)
    loop: dict = {}
    loop["self"] = loop
    assert json_depth(loop, 10) > 10 and json_depth({"a": [{}]}, 10) == 3
    cols = codec.columns_of([(1e9, "INFO", "ok", "", None, "", ""),
                             (1e300, "INFO", "late", "", None, "", ""),
                             (1e9, "INFO", "deep", "", None, "", '{"a":[[[1]]]}')])
    rows, errors = rows_of(cols, caps)
    assert [r[5] for r in rows] == ["ok"]
    assert [(e.index, e.field) for e in errors] == [(1, "timestamp"), (2, "extra")]


def test_token_files_others_can_use_or_that_are_empty_are_refused(tmp_path):
    from marin.services.endpoints import TokenFileError, read_token_file

    reg = EndpointRegistry(str(tmp_path / "c"))
    token = reg.ensure_token()
    path = tmp_path / "c" / "token"
    assert read_token_file(str(path)) == token
    for mode in (0o644, 0o660, 0o606, 0o666):
        path.chmod(mode)
        with pytest.raises(TokenFileError, match=rf"\(mode 0{mode:o}\); run `chmod 600 "
                                                 rf"{path}`"):
            reg.read_token()
    path.chmod(0o600)
    path.write_text("  \n")
    with pytest.raises(TokenFileError, match="is empty"):
        reg.ensure_token()
    path.unlink()
    assert reg.read_token() is None and reg.ensure_token() != token


def test_a_failed_call_makes_every_channel_resolve_the_url_again(tmp_path, monkeypatch):
    import socket

    from marin.services.channel import ServiceChannel, ServiceError
    from marin.services.proto import services_pb2 as pb
    from marin.services.proto import services_pb2_grpc as pb_grpc
    from marin.services.server import Service, ServiceConfig

    monkeypatch.setenv("MARIN_CLUSTERS", str(tmp_path / "clusters"))
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    reg = EndpointRegistry.for_cluster("c")
    reg.register(Endpoint("/system/kv", dead, pid=1))
    url = "iris://c?endpoint=/system/kv"
    first = ServiceChannel(url, pb_grpc.KVServiceStub)
    with pytest.raises(ServiceError, match="UNAVAILABLE"):
        first.call("Info", pb.InfoRequest(), timeout=2, attempts=1)
    first.close()
    service = Service(ServiceConfig(kind="kv", data=str(tmp_path / "kv"),
                                    cluster="c")).start()  # registers its own address
    try:
        second = ServiceChannel(url, pb_grpc.KVServiceStub)
        assert second.call("Info", pb.InfoRequest(), timeout=5, attempts=1).service == "kv"
        second.close()
    finally:
        service.stop(grace=0)
