"""Plugin discovery cost and remote status reads.

    python bench/bench_plugins_storage.py

* ``marin --help`` against ``python -c pass`` and ``python -c "import marin.cli"``: what
  the command costs beyond starting Python, and whether plugin discovery is part of it
  (it should not be: plugins are found and loaded only when used). Also the cost of
  discovering every entry point and of loading every plugin, measured in-process.
* Status reads of 1,000 finished steps on a ``gs://`` prefix against fake-gcs-server on
  loopback: ``read_many`` (concurrent requests) against one read after another.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _wall(command: list[str], repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_help() -> None:
    py = sys.executable
    bare = _wall([py, "-c", "pass"])
    import_cli = _wall([py, "-c", "import marin.cli"])
    help_ = _wall([py, "-m", "marin.cli", "--help"])
    discover = _wall([py, "-c", "from marin import registry; "
                      "[registry.available(g) for g in registry.groups()]"])
    load_all = _wall([py, "-c", "from marin import registry; registry.check_all()"], 3)
    print(f"python -c pass:                  {bare * 1e3:7.0f} ms")
    print(f"import marin.cli:                {import_cli * 1e3:7.0f} ms")
    print(f"marin --help:                    {help_ * 1e3:7.0f} ms "
          f"(+{(help_ - bare) * 1e3:.0f} ms over bare Python)")
    print(f"discover all entry points:       {discover * 1e3:7.0f} ms "
          f"(+{(discover - bare) * 1e3:.0f} ms; not done by --help)")
    print(f"load every plugin:               {load_all * 1e3:7.0f} ms (marin plugins check)")


def bench_gcs_status_reads(n: int = 1000) -> None:
    import os

    from marin.execution.status import StatusRecord, StepStatus, status_path
    from marin.storage import get_storage, reset_storage_instances
    from tests import servers

    with servers.gcs_emulator() as endpoint:
        os.environ["STORAGE_EMULATOR_HOST"] = endpoint
        reset_storage_instances()
        bucket = servers.create_gcs_bucket(endpoint)
        storage = get_storage(f"gs://{bucket}")
        record = StatusRecord.now(StepStatus.SUCCESS, "bench", "").encode()
        paths = [status_path(f"gs://{bucket}/p/step{i}-0000000{i % 10}") for i in range(n)]
        for path in paths:
            storage.write(path, record)
        t0 = time.perf_counter()
        sequential = [storage.read(p) for p in paths]
        t1 = time.perf_counter()
        batched = storage.read_many(paths)
        t2 = time.perf_counter()
        assert all(b is not None for b in batched)
        assert [b.data for b in sequential] == [b.data for b in batched]
        print(f"gs:// status reads of {n} steps on fake-gcs-server: sequential "
              f"{t1 - t0:.2f} s, read_many {t2 - t1:.2f} s ({(t1 - t0) / (t2 - t1):.1f}x)")


if __name__ == "__main__":
    bench_help()
    bench_gcs_status_reads()
