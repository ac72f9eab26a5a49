"""Commit and resume of a resumable step whose checkpoints fill a large folder: the
attempt-folder copy and move (before shared folders) against the shared checkpoint folder
(``marin.execution.shared``), on a local disk and on fake-gcs-server, in one run.

    python bench/bench_shared_commit.py                    # 1 GB in 2,000 objects
    python bench/bench_shared_commit.py --megabytes 256    # a smaller folder, same count

Resume: what a new attempt does before it runs (the worker's ``_adopt_latest_attempt``; before:
a copy of the whole earlier attempt, checkpoints included). Commit: the move of the attempt
folder into the output, and the listing of the shared folders the status records.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from marin.execution.shared import PUBLISHED_BY, shared_names
from marin.execution.status import attempt_path, attempts_folder
from marin.execution.worker import StepJob, _adopt_latest_attempt
from marin.storage import Storage, get_storage


def _job(output: str, run_id: str) -> StepJob:
    return StepJob(key="k", name="train", output_path=output, fn=print, config=None, info={},
                   code_fingerprint="", run_id=run_id, lease_ttl=60, poll_interval=1,
                   resume=True)


def _fill(storage: Storage, folder: str, objects: int, size: int) -> None:
    """``objects`` files of ``size`` bytes in 20 step folders, as orbax lays them out."""
    data = os.urandom(size)
    paths = [f"{folder}/step_{i % 20:08d}/state/d/{i:06d}" for i in range(objects)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: storage.write(p, data), paths))


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(root: str, objects: int, size: int) -> dict[str, float]:
    storage = get_storage(root)
    old, new = f"{root}/before", f"{root}/shared"
    # Before: the checkpoints are inside the earlier attempt's folder.
    _fill(storage, f"{attempt_path(old, 'r1')}/checkpoints", objects, size)
    storage.write(f"{attempt_path(old, 'r1')}/metrics.jsonl", b"{}\n" * 1000)
    copy_resume = _timed(lambda: storage.copy_tree(attempt_path(old, "r1"),
                                                   attempt_path(old, "r2")))
    copy_commit = _timed(lambda: storage.move_tree(attempt_path(old, "r2"), old))
    # After: the checkpoints are in the output's shared folder, published by r1.
    _fill(storage, f"{new}/checkpoints/runs/r1", objects, size)
    storage.write(f"{new}/checkpoints/{PUBLISHED_BY}", b"r1")
    storage.write(f"{attempt_path(new, 'r1')}/metrics.jsonl", b"{}\n" * 1000)
    resume = _timed(lambda: _adopt_latest_attempt(storage, _job(new, "r2")))
    commit = _timed(lambda: (storage.move_tree(attempt_path(new, "r2"), new),
                             shared_names(storage, new)))
    storage.delete_tree(attempts_folder(new))
    return {"copying resume": copy_resume, "copying commit": copy_commit,
            "shared resume": resume, "shared commit": commit}


def report(where: str, figures: dict[str, float], megabytes: float, objects: int) -> None:
    print(f"\n{where}: a checkpoint folder of {megabytes:.0f} MB in {objects} objects")
    for kind in ("resume", "commit"):
        before, after = figures[f"copying {kind}"], figures[f"shared {kind}"]
        print(f"  {kind:7} copying {before:8.2f} s   shared {after:7.3f} s   "
              f"{before / max(after, 1e-9):8.0f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1024)
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--skip-gcs", action="store_true")
    args = parser.parse_args()
    size = int(args.megabytes * 2**20 / args.objects)
    with tempfile.TemporaryDirectory(dir=os.environ.get("MARIN_BENCH_DIR")) as folder:
        report("local disk", measure(folder, args.objects, size), args.megabytes, args.objects)
    if args.skip_gcs:
        return
    from tests import servers

    with servers.gcs_emulator() as endpoint:
        os.environ["STORAGE_EMULATOR_HOST"] = endpoint
        bucket = servers.create_gcs_bucket(endpoint)
        report("fake-gcs-server", measure(f"gs://{bucket}", args.objects, size),
               args.megabytes, args.objects)


if __name__ == "__main__":
    main()
