"""The services under bad input, large answers and crashes, as real processes on loopback."""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import pytest

from marin.services import codec
from marin.services.kv_service.client import KVClient
from marin.services.log_service.client import LogClient
from marin.services.log_service.reader import query
from marin.services.proto import services_pb2 as pb
from marin.services.proto import services_pb2_grpc as pb_grpc
from tests.conftest import ROOT
from tests.services_util import ServiceProcess, process_gone, run_marin, wait_until

pytestmark = pytest.mark.slow


def _entry(msg: str, extra: str = "") -> tuple:
    return (1.7e9, "INFO", msg, "good", None, "", extra)


def test_a_bad_batch_fails_only_itself_not_the_group_commit_it_shares(tmp_path: Path):
    writers, batches, per_batch = 6, 60, 20
    deep = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
    with ServiceProcess("logger", tmp_path / "data", tmp_path / "clusters") as svc:
        channel = grpc.insecure_channel(svc.address)
        stub = pb_grpc.LogServiceStub(channel)
        failures: list[str] = []
        bad_codes: set[grpc.StatusCode] = set()
        bad_replies: list[pb.WriteResponse] = []
        done = threading.Event()

        def good(w: int) -> None:
            for seq in range(1, batches + 1):
                rows = [_entry(f"w{w}:{seq}:{i}") for i in range(per_batch)]
                try:
                    stub.Write(pb.WriteRequest(client_id=f"good-{w}", seq=seq, count=per_batch,
                                               payload=codec.encode(rows)), timeout=60)
                except grpc.RpcError as e:
                    failures.append(f"{e.code()}: {e.details()}")

        def bad() -> None:
            attempts = [("evil", 2**63), ("evil", 2**64 - 1), ("x" * 10_000, 1)]
            i = 0
            while not done.is_set():
                client, seq = attempts[i % len(attempts)]
                i += 1
                try:
                    stub.Write(pb.WriteRequest(client_id=client, seq=seq, count=1,
                                               payload=codec.encode([_entry("bad")])),
                               timeout=60)
                except grpc.RpcError as e:
                    bad_codes.add(e.code())
                try:
                    bad_replies.append(stub.Write(pb.WriteRequest(
                        client_id="nested", seq=i, count=2,
                        payload=codec.encode([_entry("deep", deep), _entry("fine")])),
                        timeout=60))
                except grpc.RpcError as e:
                    bad_codes.add(e.code())

        threads = [threading.Thread(target=good, args=(w,)) for w in range(writers)]
        spoiler = threading.Thread(target=bad)
        spoiler.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done.set()
        spoiler.join()
        assert failures == []
        assert bad_codes == {grpc.StatusCode.INVALID_ARGUMENT}
        assert all(r.accepted == 1 and [(e.index, e.field) for e in r.errors] == [(0, "extra")]
                   for r in bad_replies)
        stored = [e["msg"] for e in query(svc.url, limit=100_000)[0]]
        expected = {f"w{w}:{s}:{i}" for w in range(writers) for s in range(1, batches + 1)
                    for i in range(per_batch)}
        assert sorted(m for m in stored if m.startswith("w")) == sorted(expected)
        assert stored.count("fine") == len(bad_replies) and "bad" not in stored
        channel.close()


def test_out_of_range_requests_get_an_answer_or_invalid_argument(tmp_path: Path):
    clusters = tmp_path / "clusters"
    with ServiceProcess("logger", tmp_path / "logs", clusters) as logger, \
            ServiceProcess("kv", tmp_path / "kv", clusters) as kv_svc:
        log_channel = grpc.insecure_channel(logger.address)
        log_stub = pb_grpc.LogServiceStub(log_channel)
        log_stub.Write(pb.WriteRequest(payload=codec.encode([_entry("one")]), count=1),
                       timeout=10)
        assert log_stub.Query(pb.QueryRequest(after_id=2**63 - 1), timeout=10).count == 0
        for request in (pb.QueryRequest(after_id=-1), pb.QueryRequest(since=float("nan"))):
            with pytest.raises(grpc.RpcError) as info:
                log_stub.Query(request, timeout=10)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        log_channel.close()

        keys = ["\U0010ffff", "\U0010ffffa", "\U0010ffff\U0010ffff", "\ud7ff", "\ud7ffz",
                "\ue000", "\uffff", "a\U0010ffff", "b"]
        kv = KVClient.connect(kv_svc.url)
        for key in keys:
            kv.put(key, key)
        for prefix in ("\U0010ffff", "\U0010ffff\U0010ffff", "\ud7ff", "a", "\uffff", ""):
            assert [i.key for i in kv.list(prefix)] == sorted(k for k in keys
                                                              if k.startswith(prefix))
        with pytest.raises(codec.TextError, match="lone surrogate"):
            kv.list("\ud800")  # what Python makes of bytes that are not UTF-8
        kv.close()
        # The same bytes sent raw: not a valid message.
        raw = grpc.insecure_channel(kv_svc.address).unary_unary(
            "/marin.services.KVService/List", request_serializer=lambda b: b,
            response_deserializer=pb.KVListResponse.FromString)
        for body in (b"\x0a\x03\xed\xa0\x80", b"\xff\xff"):
            with pytest.raises(grpc.RpcError) as info:
                raw(body, timeout=10)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "KVListRequest" in info.value.details()
        env = {**os.environ, "MARIN_CLUSTERS": str(clusters)}
        refused = subprocess.run([sys.executable, "-m", "marin.cli", "kv", "get", "--cluster",
                                  "t", os.fsdecode(b"k\xff")], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode == 2 and "key 'k\\udcff' is not valid text" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1


def test_client_entries_the_wire_cannot_carry_are_refused_without_stopping_the_client(
        tmp_path: Path):
    deep: dict = {}
    for _ in range(2000):
        deep = {"d": deep}
    with ServiceProcess("logger", tmp_path / "data", tmp_path / "clusters") as svc:
        with LogClient.connect(svc.url) as log:
            log.write_batch([{"msg": "huge step", "step": 2**64},
                             {"msg": "far future", "timestamp": 1e300},
                             {"msg": "deep", "extra": deep}, {"msg": "kept"}])
            assert log.flush(30)
            log.write_batch([{"msg": "after"}])
            assert log.flush(30)
            assert log.stats()["invalid"] == 3 and log.stats()["sent"] == 2
        msgs = [e["msg"] for e in query(svc.url)[0]]
        assert msgs[0] == "kept" and msgs[-1] == "after"
        assert sum("refused 3 invalid entries" in m for m in msgs) == 1


def test_answers_over_the_message_cap_come_in_pages(tmp_path: Path):
    cap = 1 << 20
    rng = random.Random(5)
    # Random text barely compresses: 40 entries of 60,000 characters are over 1.5 MiB
    # compressed, so no single reply under the cap could hold them.
    msgs = [f"{i:03d} " + base64.b85encode(rng.randbytes(48_000)).decode()[:60_000]
            for i in range(40)]
    with ServiceProcess("logger", tmp_path / "data", tmp_path / "clusters", "t", "127.0.0.1",
                        "--max-message-bytes", str(cap)) as svc:
        with LogClient.connect(svc.url) as log:
            for start in range(0, len(msgs), 8):
                log.push_batch([{"msg": m, "run": "big"} for m in msgs[start:start + 8]])
        channel = grpc.insecure_channel(svc.address)
        first = pb_grpc.LogServiceStub(channel).Query(pb.QueryRequest(limit=1000), timeout=30)
        channel.close()
        assert first.more and 0 < first.count < len(msgs) and len(first.payload) < cap
        assert [e["msg"] for e in query(svc.url, limit=1000)[0]] == msgs
        assert [e["msg"] for e in query(svc.url, limit=25, newest=True)[0]] == msgs[-25:]
        assert [e["msg"] for e in query(svc.url, limit=30, after_id=3)[0]] == msgs[3:33]
        env = dict(os.environ)
        tail = run_marin(env, "logs", "tail", "-n", "500", "--url", svc.url, "--json")
        assert [json.loads(line)["msg"] for line in tail.stdout.splitlines()] == msgs
        tail = run_marin(env, "logs", "tail", "-n", "15", "--url", svc.url, "--run", "big")
        assert [line.split(": ", 1)[1] for line in tail.stdout.splitlines()] == msgs[-15:]


def _token_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MARIN_SERVICES_TOKEN"}
    return {**env, "MARIN_STATE_DIR": str(tmp_path / "state")}


@pytest.mark.parametrize("content,mode,message", [
    ("", 0o600, "is empty"),
    ("s3cret", 0o666, "run `chmod 600 {path}`"),
    ("s3cret", 0o640, "run `chmod 600 {path}`"),
])
def test_a_token_file_that_is_empty_or_shared_is_refused_in_one_line(
        tmp_path: Path, content: str, mode: int, message: str):
    env = _token_env(tmp_path)
    token = tmp_path / "state" / "clusters" / "c" / "token"
    token.parent.mkdir(parents=True)
    token.write_text(content)
    token.chmod(mode)
    message = message.format(path=token)
    try:
        up = run_marin(env, "services", "up", "--cluster", "c", "--host", "127.0.0.2",
                       code=None)
        assert up.returncode == 2, up.stdout + up.stderr
        assert str(token) in up.stderr and message in up.stderr
        assert len(up.stderr.strip().splitlines()) == 1
        assert not (token.parent / "endpoints").exists()  # nothing was started
        serve = run_marin(env, "services", "serve", "logger", "--data",
                          str(tmp_path / "data"), "--host", "127.0.0.2", "--token-file",
                          str(token), code=2)
        assert message in serve.stderr and len(serve.stderr.strip().splitlines()) == 1
        assert token.read_text() == content and token.stat().st_mode & 0o777 == mode
    finally:
        run_marin(env, "services", "down", "--cluster", "c", code=None)


def test_services_come_back_after_kill_9(tmp_path: Path):
    env = {**os.environ, "MARIN_STATE_DIR": str(tmp_path / "state")}
    url = f"iris://c?endpoint=/system/logger&root={tmp_path / 'state' / 'clusters'}"
    try:
        first = {r["service"]: r for r in json.loads(run_marin(
            env, "services", "up", "--cluster", "c", "--json").stdout)}
        dead = first["logger"]["pid"]
        os.kill(dead, signal.SIGKILL)
        wait_until(lambda: process_gone(dead), what="the killed logger gone")
        again = {r["service"]: r for r in json.loads(run_marin(
            env, "services", "up", "--cluster", "c", "--json").stdout)}
        assert again["logger"]["state"] == "started" and again["logger"]["pid"] != dead
        assert again["kv"] == {**first["kv"], "state": "already running"}
        status = json.loads(run_marin(env, "services", "status", "--cluster", "c",
                                      "--json").stdout)
        assert {(r["service"], r["state"]) for r in status} == {("logger", "up"),
                                                                ("kv", "up")}
        with LogClient.connect(url) as log:
            assert log.push_batch([{"msg": "after the crash"}]).accepted == 1
        assert [e["msg"] for e in query(url)[0]] == ["after the crash"]
    finally:
        down = json.loads(run_marin(env, "services", "down", "--cluster", "c",
                                    "--json").stdout)
    assert {r["state"] for r in down} == {"stopped"}


def test_tables_are_whole_when_piped_and_empty_answers_say_what_to_check(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "MARIN_LOGGER",
                                                            "MARIN_KV", "MARIN_CLUSTER")}
    env["MARIN_STATE_DIR"] = str(tmp_path / "state")
    try:
        run_marin(env, "services", "up", "--cluster", "c")
        rows = json.loads(run_marin(env, "services", "status", "--cluster", "c",
                                    "--json").stdout)
        table = run_marin(env, "services", "status", "--cluster", "c").stdout
        for r in rows:
            line = next(x for x in table.splitlines() if f" {r['service']} " in x)
            assert [c.strip() for c in line.strip("│ \n").split("│")][:5] == [
                r["service"], r["address"], str(r["pid"]), r["host"], "up"]
        tail = run_marin(env, "logs", "tail", "--cluster", "c", "--run", "exp-9")
        assert tail.stdout == ""
        assert "no entries for run exp-9" in tail.stderr and "$MARIN_RUN=exp-9" in tail.stderr
        assert len(tail.stderr.strip().splitlines()) == 1
        status = run_marin(env, "status", "--cluster", "c")
        assert status.stdout == "" and "export MARIN_CLUSTER=c" in status.stderr
    finally:
        run_marin(env, "services", "down", "--cluster", "c")


def test_a_stopped_service_waiting_to_be_reaped_counts_as_stopped(tmp_path: Path):
    from marin.services import manage

    # The parent starts a child that exits at once and never reaps it: a zombie, as a
    # service is after SIGTERM until init reaps it.
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                               "p = subprocess.Popen(['true'])\nprint(p.pid, flush=True)\n"
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        zombie = int(parent.stdout.readline())
        wait_until(lambda: process_gone(zombie), what="the child exited")
        assert os.path.exists(f"/proc/{zombie}")  # not reaped: kill(pid, 0) still succeeds
        assert manage._exists(zombie) is False
        assert manage._exists(parent.pid) is True
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()


def test_bad_command_line_input_is_one_line_and_exit_2(tmp_path: Path, monkeypatch, capsys):
    from marin.cli import main

    clusters = tmp_path / "clusters"
    monkeypatch.setenv("MARIN_STATE_DIR", str(tmp_path / "state"))
    with ServiceProcess("logger", tmp_path / "logs", clusters) as logger, \
            ServiceProcess("kv", tmp_path / "kv", clusters) as kv:
        cases = [
            (["logs", "query", "--url", logger.url, "--limit", "0"], "--limit/-n 0"),
            (["logs", "query", "--url", logger.url, "--limit", str(2**40)], f"limit {2**40}"),
            (["logs", "query", "--url", logger.url, "--step", str(2**64)], f"step {2**64}"),
            (["logs", "tail", "--url", logger.url, "--level", "loud"], "level 'loud'"),
            (["logs", "tail", "--url", logger.url, "--since", "nan"], "'nan'"),
            (["logs", "tail", "--url", logger.url, "--until", "1e400"], "'1e400'"),
            (["kv", "put", "--url", kv.url, "k", "v", "--expected-version", str(2**64)],
             f"expected_version {2**64}"),
            (["services", "up", "--cluster", "c", "--logger-port", "99999"],
             "--logger-port 99999"),
            (["services", "up", "--cluster", "c", "--data", str(ROOT / "pyproject.toml")],
             "--data"),
            (["services", "up", "--cluster", "c", "--clusters", "/proc/no/such"],
             "cannot register the logger endpoint in /proc/no/such/c"),
            # the logger's port is taken, the KV service starts: `up` must stop it again
            (["services", "up", "--cluster", "c", "--logger-port", logger.address.split(":")[1]],
             f"cannot listen on {logger.address}"),
            (["services", "serve", "kv", "--data", "/proc/no/such"], "--data /proc/no/such"),
            (["services", "serve", "kv", "--data", str(tmp_path / "x"), "--port", "70000"],
             "--port 70000"),
        ]
        for args, message in cases:  # in this process: an exception fails the test
            code = main(args)
            err = capsys.readouterr().err
            assert code == 2 and message in err, (args, err)
            assert len(err.strip().splitlines()) == 1, (args, err)
        # A failed `up` leaves nothing behind: no record, no process.
        main(["services", "status", "--cluster", "c", "--json"])
        assert capsys.readouterr().out.strip() == "[]"


def test_odd_records_and_values_are_shown_not_fatal(tmp_path: Path):
    clusters = tmp_path / "clusters"
    env = {**os.environ, "MARIN_CLUSTERS": str(clusters)}
    with ServiceProcess("logger", tmp_path / "logs", clusters) as logger, \
            ServiceProcess("kv", tmp_path / "kv", clusters) as kv_svc:
        with LogClient.connect(logger.url) as log:
            log.push_batch([{"msg": "red \x1b[31mtext\x1b[0m \u202eevil\rover", "run": "r\x1b"}])
        tail = run_marin(env, "logs", "tail", "--url", logger.url, "--run", "r\x1b").stdout
        assert "\x1b" not in tail and "\u202e" not in tail and "\r" not in tail
        assert "red \\x1b[31mtext\\x1b[0m \\u202eevil\\x0dover" in tail
        with KVClient.connect(kv_svc.url) as kv:
            kv.put("steps/e/a", "5")
            kv.put("steps/e/b", "[" * 100_000)
            kv.put("steps/e/c", json.dumps({"step": "c", "state": "succeeded", "updated": 1e999,
                                            "host": "[/]"}))
            kv.put("m/[/]", "[bold]not markup[/] \x1b[2J")
        states = json.loads(run_marin(env, "status", "--url", kv_svc.url, "--json").stdout)
        assert sorted((s["step"], s["state"]) for s in states) == [
            ("c", "succeeded"), ("e/a", "unreadable record"), ("e/b", "unreadable record")]
        table = run_marin(env, "status", "--url", kv_svc.url).stdout
        assert table.count("unreadable record") == 2 and "[/]:" in table
        listed = run_marin(env, "kv", "list", "--url", kv_svc.url, "m/").stdout
        assert "[bold]not markup[/] \\x1b[2J" in listed and "\x1b" not in listed
        # A corrupted endpoint record reads as none, in one line, until a service replaces it.
        record = clusters / "t" / "endpoints" / "system" / "logger.json"
        good = record.read_bytes()
        for corrupt in (b"[1]", b'{"name": "/system/logger", "address": 5}', b"\xff"):
            record.write_bytes(corrupt)
            result = run_marin(env, "logs", "tail", "--cluster", "t", code=1)
            assert "no endpoint /system/logger registered" in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1
        record.write_bytes(good)
        assert "red" in run_marin(env, "logs", "tail", "--cluster", "t").stdout
