"""Local storage with a fixed latency per request, standing in for a remote bucket.

    storage = SlowStorage(0.02, read_concurrency=64)   # 20 ms per read or listing

Reads in ``read_many`` overlap, ``read_concurrency`` at a time, as they do on gs:// and
s3://; one by one, each read and each listing waits ``latency`` seconds.
"""

from __future__ import annotations

import time

from marin.storage._local import LocalStorage
from marin.storage.base import Storage


class SlowStorage(LocalStorage):
    def __init__(self, latency: float, read_concurrency: int | None = None):
        self.latency = latency
        if read_concurrency is not None:
            self.read_concurrency = read_concurrency

    def read(self, path):
        time.sleep(self.latency)
        return super().read(path)

    def read_many(self, paths):
        return Storage.read_many(self, paths)  # the concurrent default, not the local loop

    def list_dir(self, path):
        time.sleep(self.latency)
        return super().list_dir(path)
