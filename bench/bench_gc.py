"""``marin gc`` on fake-gcs-server: 10,000 unreachable step outputs (three records and one
data file each) found and deleted, and whether the emulator answers gcsfs's batch deletes.

    python bench/bench_gc.py                  # 10,000 outputs
    python bench/bench_gc.py --outputs 2000

The outputs are written straight to the bucket, none named by an invocation record, so
every one is unreachable. Timed: the scan and plan (``collect``), then ``delete``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from marin.execution.gc import collect, delete
from marin.execution.gc_scan import scan_prefix
from marin.execution.states import StepState
from marin.execution.status import StatusRecord
from marin.storage import get_storage


def _batch_delete_works(fs, bucket: str) -> bool:
    """Whether the emulator answers a GCS batch request (gcsfs's ``_rm_files``, which it
    uses only on Google's endpoint): two objects deleted by one."""
    from fsspec.asyn import sync

    paths = [f"{bucket}/probe/{i}" for i in range(2)]
    for p in paths:
        fs.pipe(p, b"x")
    errors = [e for e in sync(fs.loop, fs._rm_files, paths) if isinstance(e, Exception)]
    fs.invalidate_cache()
    return not errors and not any(fs.exists(p) for p in paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", type=int, default=10_000)
    args = parser.parse_args()
    from tests import servers

    with servers.gcs_emulator() as endpoint:
        os.environ["STORAGE_EMULATOR_HOST"] = endpoint
        bucket = servers.create_gcs_bucket(endpoint)
        prefix = f"gs://{bucket}/p"
        storage = get_storage(prefix)
        print("GCS batch delete requests on fake-gcs-server:",
              "answered" if _batch_delete_works(storage.fs, bucket) else
              "refused (400 per part): deletes measured here are single requests, "
              f"{storage.read_concurrency} at a time")
        status = StatusRecord.now(StepState.SUCCEEDED, "r", "f", outputs=["data"]).encode()
        paths = [(f"{prefix}/s/old-{i:08x}/{name}", data) for i in range(args.outputs)
                 for name, data in ((".executor_status", status),
                                    (".executor_info", b'{"version": {}}'), ("data", b"x" * 100))]
        start = time.perf_counter()
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(lambda p: storage.write(*p), paths))
        print(f"wrote {args.outputs} outputs ({len(paths)} objects) in "
              f"{time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        found = collect(scan_prefix(prefix), [])
        planned = time.perf_counter() - start
        start = time.perf_counter()
        delete(prefix, found)
        deleted = time.perf_counter() - start
        left = storage.list_files(prefix)
        print(f"{len(found)} unreachable outputs: scan and plan {planned:.1f} s, delete "
              f"{deleted:.1f} s, total {planned + deleted:.1f} s (goal < 60 s); "
              f"{len(left)} objects left")


if __name__ == "__main__":
    main()
