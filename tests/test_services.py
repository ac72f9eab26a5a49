"""The log and KV services as real processes on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import grpc
import pytest

from marin.services import codec
from marin.services.channel import ServiceError
from marin.services.endpoints import EndpointRegistry
from marin.services.kv_service.client import KVClient, VersionConflictError
from marin.services.log_service.client import LogClient
from marin.services.log_service.reader import query
from marin.services.proto import services_pb2 as pb
from marin.services.proto import services_pb2_grpc as pb_grpc
from tests.conftest import ROOT
from tests.services_util import ServiceProcess, wait_until

pytestmark = pytest.mark.slow

WRITER = """
import sys
from marin.services.log_service.client import LogClient
url, writer, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with LogClient.connect(url, when_full="block", batch_entries=500) as log:
    for start in range(0, n, 50):
        log.write_batch([{"level": "INFO", "msg": f"{writer}:{i}", "run": writer, "step": i}
                         for i in range(start, min(n, start + 50))])
    assert log.flush(60), log.stats()
    assert log.stats()["dropped"] == 0 and log.stats()["rejected"] == 0, log.stats()
"""


def _all(url: str, **filters) -> list[dict]:
    entries, last, out = [None], 0, []
    while entries:
        entries, last = query(url, after_id=last, limit=50_000, **filters)
        out.extend(entries)
    return out


def test_many_writer_processes_store_exact_counts(tmp_path: Path):
    with ServiceProcess("logger", tmp_path / "data", tmp_path / "clusters") as svc:
        writers, n = 6, 3000
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, svc.url, f"w{w}", str(n)],
                                  cwd=ROOT) for w in range(writers)]
        assert [p.wait(timeout=120) for p in procs] == [0] * writers
        stored = _all(svc.url)
        assert len(stored) == writers * n
        assert Counter(e["run"] for e in stored) == {f"w{w}": n for w in range(writers)}
        assert len({e["msg"] for e in stored}) == writers * n  # no duplicates
        assert all(e["msg"] == f"{e['run']}:{e['step']}" for e in stored)
        assert len(_all(svc.url, run="w3", step=17)) == 1


def test_kill_9_and_restart_on_a_new_port_loses_no_acknowledged_entry(tmp_path: Path):
    svc = ServiceProcess("logger", tmp_path / "data", tmp_path / "clusters").start()
    first_address = svc.address
    client = LogClient.connect(svc.url, when_full="block", batch_entries=200, linger=0.001)
    acked: list[str] = []
    written: list[str] = []
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            batch = [{"msg": f"buffered {i + k}"} for k in range(20)]
            client.write_batch(batch)
            written.extend(e["msg"] for e in batch)
            i += 20
            if i % 200 == 0:
                try:
                    client.push_batch([{"msg": f"durable {i}"}], timeout=0.5)
                    acked.append(f"durable {i}")
                except ServiceError:
                    pass  # not acknowledged: the service is down; may or may not be stored

    thread = threading.Thread(target=write)
    thread.start()
    try:
        wait_until(lambda: len(acked) >= 5, what="acknowledged entries before the kill")
        svc.kill9()  # mid-stream: the writer keeps writing into the client's buffer
        before_restart = len(written)
        wait_until(lambda: len(written) > before_restart + 500, what="writes while down")
        svc.start()  # same data, a new port chosen by the OS
        assert svc.address != first_address
        wait_until(lambda: len(acked) >= 15, what="acknowledged entries after the restart")
    finally:
        stop.set()
        thread.join()
    assert client.flush(60)
    assert client.stats()["dropped"] == 0
    client.close()
    stored = Counter(e["msg"] for e in _all(svc.url))
    svc.stop()
    assert all(stored[m] == 1 for m in acked)           # acknowledged: present, once
    assert all(stored[m] == 1 for m in written)         # buffered: delivered, once
    assert max(stored.values()) == 1


def test_off_loopback_a_token_is_required(tmp_path: Path, monkeypatch):
    clusters = tmp_path / "clusters"
    refused = subprocess.run([sys.executable, "-m", "marin.services.serve", "logger",
                              "--data", str(tmp_path / "x"), "--host", "127.0.0.2"],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "needs a token" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    with ServiceProcess("logger", tmp_path / "data", clusters, "t", "127.0.0.2") as svc:
        assert svc.address.startswith("127.0.0.2:")
        reg = EndpointRegistry(str(clusters / "t"))
        assert (clusters / "t" / "token").stat().st_mode & 0o777 == 0o600
        channel = grpc.insecure_channel(svc.address)
        stub = pb_grpc.LogServiceStub(channel)
        for metadata in (None, (("authorization", "Bearer wrong"),)):
            with pytest.raises(grpc.RpcError) as info:
                stub.Info(pb.InfoRequest(), metadata=metadata, timeout=10)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        channel.close()
        # The iris resolver hands out the registry's token; a direct address needs the env.
        with LogClient.connect(svc.url) as log:
            assert log.push_batch([{"msg": "with token"}]).accepted == 1
        with pytest.raises(ServiceError, match="UNAUTHENTICATED"):
            query(f"http://{svc.address}")
        monkeypatch.setenv("MARIN_SERVICES_TOKEN", reg.read_token())
        assert [e["msg"] for e in query(f"http://{svc.address}")[0]] == ["with token"]


def _write(stub, payload: bytes, count: int, seq: int = 1):
    return stub.Write(pb.WriteRequest(client_id="raw", seq=seq, payload=payload, count=count),
                      timeout=10)


def test_oversized_and_malformed_batches_are_rejected_cleanly(tmp_path: Path):
    with ServiceProcess("logger", tmp_path / "data", tmp_path / "clusters", "t", "127.0.0.1",
                        "--max-batch-entries", "100", "--max-message-bytes",
                        str(1 << 20)) as svc:
        channel = grpc.insecure_channel(svc.address)
        stub = pb_grpc.LogServiceStub(channel)
        row = (1.0e9, "INFO", "ok", "", None, "", "")
        bad: list[tuple[bytes, int, str]] = [
            (b"\x00garbage", 1, "not a zstd frame"),
            (codec.compress(b"\xff\xff\xff"), 1, "not a LogColumns message"),
            (codec.encode([row] * 101), 101, "exceeds the cap of 100"),
            (codec.encode([row] * 2), 3, "count says 3"),
        ]
        cols = codec.columns_of([row, row])
        del cols.level[1]
        bad.append((codec.compress(cols.SerializeToString()), 2, "column level has 1"))
        for payload, count, message in bad:
            with pytest.raises(grpc.RpcError) as info:
                _write(stub, payload, count)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert message in info.value.details()
        huge = os.urandom(1 << 20)  # over the message cap on the wire
        with pytest.raises(grpc.RpcError) as info:
            _write(stub, huge, 1)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        mixed = [row, (1.0e9, "LOUD", "bad level", "", None, "", ""),
                 (1.0e9, "INFO", "bad extra", "", None, "", "[1]"),
                 (1.0e9, "INFO", "x" * 70_000, "", None, "", ""),
                 (float("nan"), "INFO", "bad time", "", None, "", ""), row]
        reply = _write(stub, codec.encode(mixed), len(mixed), seq=2)
        assert reply.accepted == 2
        assert [(e.index, e.field) for e in reply.errors] == [
            (1, "level"), (2, "extra"), (3, "msg"), (4, "timestamp")]
        assert [e["msg"] for e in query(svc.url)[0]] == ["ok", "ok"]
        assert stub.Info(pb.InfoRequest(), timeout=10).items == 2  # still serving
        channel.close()


def test_kv_service_and_cli_round_trip(tmp_path: Path, monkeypatch):
    env = {**os.environ, "MARIN_STATE_DIR": str(tmp_path / "state")}
    marin = [sys.executable, "-m", "marin.cli"]

    def cli(*args: str, code: int = 0) -> str:
        result = subprocess.run([*marin, *args], cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == code, result.stderr
        return result.stdout

    up = json.loads(cli("services", "up", "--cluster", "c", "--json"))
    try:
        assert {r["service"] for r in up} == {"logger", "kv"}
        status = json.loads(cli("services", "status", "--cluster", "c", "--json"))
        assert {r["state"] for r in status} == {"up"} and len({r["pid"] for r in status}) == 2
        cli("kv", "put", "--cluster", "c", "cfg/lr", "3e-4")
        conflict = subprocess.run([*marin, "kv", "put", "--cluster", "c", "cfg/lr", "1",
                                   "--expected-version", "0"], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=60)
        assert conflict.returncode == 1 and "version 1, not 0" in conflict.stderr
        assert cli("kv", "get", "--cluster", "c", "cfg/lr").strip() == "3e-4"
        listed = json.loads(cli("kv", "list", "--cluster", "c", "cfg/", "--json"))
        assert [(i["key"], i["version"]) for i in listed] == [("cfg/lr", 1)]
        monkeypatch.setenv("MARIN_STATE_DIR", env["MARIN_STATE_DIR"])  # for the clients below
        kv = KVClient.connect("iris://c?endpoint=/system/kv")
        with pytest.raises(VersionConflictError):
            kv.put("cfg/lr", "5", expected_version=3)
        assert kv.put("cfg/lr", "5", expected_version=1).version == 2
        kv.close()
        with LogClient.connect("iris://c?endpoint=/system/logger") as log:
            log.push_batch([{"msg": "from a client", "run": "r9", "level": "ERROR"},
                            {"msg": "quiet", "run": "r9", "level": "DEBUG"}])
        lines = cli("logs", "query", "--cluster", "c", "--run", "r9", "--level", "warning",
                    "--json").splitlines()
        assert [json.loads(x)["msg"] for x in lines] == ["from a client"]
        assert "from a client" in cli("logs", "tail", "--cluster", "c", "-n", "5")
        cli("logs", "query", "--cluster", "c", "--since", "yesterday", code=2)
    finally:
        down = json.loads(cli("services", "down", "--cluster", "c", "--json"))
    assert {r["state"] for r in down} == {"stopped"}
    cli("services", "status", "--cluster", "c", code=1)


EXPERIMENT = """
import dataclasses, logging, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from marin.execution import Executor, ExecutorStep, this_output_path
from marin.training import train_lm
from tests.helpers.training import tiny_config

@dataclasses.dataclass(frozen=True)
class HelloConfig:
    output: str

def hello(config):
    logging.getLogger("experiments.hello").info("hello from the step", extra={{"step": 7}})

train = dataclasses.replace(
    tiny_config(Path({cache!r}), Path("unused"), train_steps=3, eval_every=0, log_every=1),
    output_path=this_output_path())
steps = [ExecutorStep("hello", hello, HelloConfig(output=this_output_path())),
         ExecutorStep("train", train_lm, train)]
result = Executor({prefix!r}, max_concurrent=1).run(steps)
sys.exit(0 if result.ok else 1)
"""


def test_executor_and_trainer_log_through_the_service(tmp_path: Path, cache: Path):
    clusters = tmp_path / "clusters"
    with ServiceProcess("logger", tmp_path / "logs", clusters) as logger, \
            ServiceProcess("kv", tmp_path / "kv", clusters) as kv:
        env = {**os.environ, "MARIN_LOGGER": logger.url, "MARIN_KV": kv.url,
               "MARIN_RUN": "exp-1"}
        script = EXPERIMENT.format(root=str(ROOT), cache=str(cache),
                                   prefix=str(tmp_path / "out"))
        subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True,
                       timeout=300)
        entries = _all(logger.url, run="exp-1")
        by_source = Counter(e["source"] for e in entries)
        hello = [e for e in entries if e["msg"] == "hello from the step"]
        assert len(hello) == 1 and hello[0]["step"] == 7
        assert hello[0]["source"] == "experiments.hello"
        metrics = [e for e in entries if e["msg"] == "metrics" and "train/loss" in e]
        assert [m["step"] for m in metrics] == [1, 2, 3]
        assert all(m["train/loss"] > 0 and "throughput/tokens_per_second" in m
                   for m in metrics)
        assert by_source["marin.training"] >= 3  # "step N loss ..." lines, log_every=1
        ends = {e["msg"].split()[1]: e["state"] for e in entries
                if e["source"] == "marin.executor" and e["state"] != "running"}
        assert set(ends.values()) == {"succeeded"} and len(ends) == 2
        status = subprocess.run([sys.executable, "-m", "marin.cli", "status", "--url", kv.url,
                                 "--json"], cwd=ROOT, capture_output=True, text=True,
                                timeout=60, check=True)
        states = json.loads(status.stdout)
        assert sorted(s["name"] for s in states) == ["hello", "train"]
        assert {s["state"] for s in states} == {"succeeded"}
        assert {s["pid"] for s in states} != {os.getpid()}
