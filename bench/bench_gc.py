"""``marin gc`` on object-store emulators: 10,000 unreachable step outputs (a status, an info
and a data file each) found and deleted, and whether fake-gcs-server answers batch deletes.

    python bench/bench_gc.py                        # 10,000 outputs, GCS emulator and S3
    python bench/bench_gc.py --outputs 2000 --store gcs
    python bench/bench_gc.py --store s3 --unnamed   # no invocation record names them

The outputs are versions that a newer invocation of their experiment superseded: an older
invocation record (one that failed) names them, the latest names none of them, so every
one is unreachable. ``--unnamed``: no record names them (gc reads each one's info record to
know it for a step output, ``gc.reach.is_output``). Beside them, a nested prefix
(``p/team``, its own ``.marin/``) of 100 outputs, which gc must leave whole. Timed: the
scan and plan (``collect``: the listing, the records, the leases; with ``--unnamed``, each
output's info record too), then ``delete`` (a fresh listing, then batched deletes), and
apart from them the nested-prefix check over the listing (``nested_prefixes``: no request
of its own).
On fake-gcs-server they are loaded at its start (``-data``), not uploaded: its memory
backend finds each object by a scan of its bucket's list, so each request costs time in
proportion to the objects the bucket holds, uploads included. The bench also times the
same number of deletes on a bucket of 3,000 objects, to tell the emulator's share apart.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from marin.execution import StepState
from marin.execution.gc import collect, delete
from marin.execution.gc.reach import nested_prefixes
from marin.execution.gc.scan import scan_prefix
from marin.execution.invocation_record import InvocationRecord, InvocationStep
from marin.execution.status import StatusRecord
from marin.storage import get_storage, reset_storage_instances

BUCKET = "bench-gc"


def _objects(outputs: int, prefix: str, tag: str = "old") -> list[tuple[str, bytes]]:
    status = StatusRecord.now(StepState.SUCCEEDED, "r", "f", outputs=["data"]).encode()
    return [(f"{prefix}/s/{tag}-{i:08x}/{name}", data) for i in range(outputs)
            for name, data in ((".executor_status", status),
                               (".executor_info", _info(f"s/{tag}-{i:08x}")),
                               ("data", b"x" * 100))]


def _records(prefix: str, outputs: int) -> list[tuple[str, bytes]]:
    """Two invocations of one experiment: the older (failed) names the ``outputs``, the
    newer, which succeeded, names one step of the same name that is not under the prefix."""
    def record(id_: str, keys: list[str], outcome: str, started: float):
        steps = tuple(InvocationStep(k, "s/old", f"{prefix}/{k}", outcome=outcome)
                      for k in keys)
        data = InvocationRecord(id_, prefix=prefix, experiment="bench.py", host="elsewhere",
                                started=started, ended=started + 1, steps=steps,
                                counts={outcome: len(steps)}).to_json()
        return f"{prefix}/.marin/invocations/{id_}.json", json.dumps(data).encode()

    return [record("20250101-000000-00000001", [f"s/old-{i:08x}" for i in range(outputs)],
                   "failed", 1735689600.0),
            record("20250102-000000-00000002", ["s/old-ffffffffff"], "succeeded",
                   1735776000.0)]


def _nested(prefix: str, outputs: int = 100) -> list[tuple[str, bytes]]:
    """A prefix of its own inside ``prefix``: its outputs and an invocation record."""
    return [(f"{prefix}/team/.marin/invocations/20250101-000000-0000.json", b"{}"),
            *[(p.replace(f"{prefix}/s/", f"{prefix}/team/s/"), data)
              for p, data in _objects(outputs, prefix, "team")]]


def _info(key: str) -> bytes:
    """An info record naming ``key``: what makes a folder a step output (``is_output``)."""
    return json.dumps({"version": {}, "key": key}).encode()


def _batch_delete_answered(storage) -> bool:
    """Whether fake-gcs-server deletes through one batch request (two objects)."""
    paths = [f"gs://{BUCKET}/probe/{i}" for i in range(2)]
    for p in paths:
        storage.write(p, b"x")
    storage.delete_files(paths)
    return not storage.list_files(f"gs://{BUCKET}/probe")


def _gc(prefix: str, outputs: int, unnamed: bool) -> str:
    storage = get_storage(prefix)
    start = time.perf_counter()
    scan = scan_prefix(prefix)
    found = collect(scan, [], older_than=None)
    planned = time.perf_counter() - start
    start = time.perf_counter()
    delete(scan, found)
    deleted = time.perf_counter() - start
    left = [f.path for f in storage.list_files(prefix)]
    nested = _nested(prefix)
    records = [] if unnamed else _records(prefix, outputs)
    assert len(found) == outputs and sorted(left) == sorted(p for p, _ in nested + records), \
        (len(found), len(left))
    listed = [p[len(prefix) + 1:] for p, _ in _objects(outputs, prefix) + nested]
    start = time.perf_counter()
    assert nested_prefixes(listed) == {"team"}
    check = time.perf_counter() - start
    return (f"{len(found)} unreachable outputs ({3 * outputs} objects"
            f"{', named by no record' if unnamed else ', superseded'}) beside a nested "
            f"prefix of {len(nested)} objects, left whole: scan and plan {planned:.1f} s, "
            f"delete {deleted:.1f} s, total {planned + deleted:.1f} s (goal < 60 s); the "
            f"nested-prefix check over {len(listed)} listed paths {1000 * check:.0f} ms")


def _small_bucket_rate(storage, prefix: str, deletes: int) -> str:
    """Deletes a second on a bucket holding 3,000 objects at a time."""
    taken = 0.0
    for done in range(0, deletes, 3000):
        paths = [p for p, _ in _objects(1000, prefix, f"r{done}")][:min(3000, deletes - done)]
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(lambda p: storage.write(p, b"x"), paths))
        start = time.perf_counter()
        storage.delete_files(paths)
        taken += time.perf_counter() - start
    return f"{deletes} deletes in buckets of 3,000 objects: {taken:.1f} s"


def bench_gcs(outputs: int, unnamed: bool) -> None:
    from tests import servers

    with ExitStack() as stack:
        data = stack.enter_context(tempfile.TemporaryDirectory())
        start = time.perf_counter()
        base = f"{data}/{BUCKET}/p"
        for path, blob in _objects(outputs, base) + _nested(base) + (
                [] if unnamed else _records(f"gs://{BUCKET}/p", outputs)):
            path = path.replace(f"gs://{BUCKET}/p", base)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            Path(path).write_bytes(blob)
        endpoint = stack.enter_context(servers.gcs_emulator(data=data))
        os.environ["STORAGE_EMULATOR_HOST"] = endpoint
        reset_storage_instances()
        print(f"fake-gcs-server loaded {3 * outputs} objects in "
              f"{time.perf_counter() - start:.1f} s")
        storage = get_storage(f"gs://{BUCKET}")
        print("GCS batch delete requests on fake-gcs-server:",
              "answered" if _batch_delete_answered(storage) else "refused")
        print("gcs:", _gc(f"gs://{BUCKET}/p", outputs, unnamed))
        print("gcs:", _small_bucket_rate(storage, f"gs://{BUCKET}/q", 3 * outputs))


def bench_s3(outputs: int, unnamed: bool) -> None:
    from tests import servers

    with servers.s3_server() as endpoint:
        os.environ["AWS_ENDPOINT_URL_S3"] = endpoint
        os.environ.update(servers.S3_ENV)
        reset_storage_instances()
        prefix = f"s3://{servers.create_s3_bucket(endpoint)}/p"
        storage = get_storage(prefix)
        objects = _objects(outputs, prefix) + _nested(prefix) + (
            [] if unnamed else _records(prefix, outputs))
        start = time.perf_counter()
        storage.write(*objects[0])  # the client's session is made once, before the threads
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(lambda p: storage.write(*p), objects[1:]))
        print(f"moto: wrote {len(objects)} objects in {time.perf_counter() - start:.1f} s")
        print("s3 (moto, DeleteObjects):", _gc(prefix, outputs, unnamed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", type=int, default=10_000)
    parser.add_argument("--store", choices=("gcs", "s3", "both"), default="both")
    parser.add_argument("--unnamed", action="store_true",
                        help="no invocation record names the outputs")
    args = parser.parse_args()
    if args.store in ("gcs", "both"):
        bench_gcs(args.outputs, args.unnamed)
    if args.store in ("s3", "both"):
        bench_s3(args.outputs, args.unnamed)


if __name__ == "__main__":
    main()
