"""In-process storage for tests and benchmarks: ``memory://name/path``."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence

from marin.storage.base import Blob, MissingSourceError, Storage

_STORE: dict[str, tuple[bytes, int]] = {}
_LOCK = threading.Lock()
_GENERATIONS = itertools.count(1)


class MemoryStorage(Storage):
    scheme = "memory"

    def read(self, path: str) -> Blob | None:
        with _LOCK:
            item = _STORE.get(_key(path))
        return None if item is None else Blob(path, item[0], item[1])

    def read_many(self, paths):
        return [self.read(p) for p in paths]

    def write(self, path: str, data: bytes) -> None:
        with _LOCK:
            _STORE[_key(path)] = (bytes(data), next(_GENERATIONS))

    def create_if_absent(self, path: str, data: bytes) -> int | None:
        with _LOCK:
            if _key(path) in _STORE:
                return None
            generation = next(_GENERATIONS)
            _STORE[_key(path)] = (bytes(data), generation)
            return generation

    def compare_and_swap(self, path: str, token: int, data: bytes) -> int | None:
        with _LOCK:
            item = _STORE.get(_key(path))
            if item is None or item[1] != token:
                return None
            generation = next(_GENERATIONS)
            _STORE[_key(path)] = (bytes(data), generation)
            return generation

    def delete_if_unchanged(self, path: str, token: int) -> bool:
        with _LOCK:
            item = _STORE.get(_key(path))
            if item is None or item[1] != token:
                return False
            del _STORE[_key(path)]
            return True

    def list_dir(self, path: str) -> list[str]:
        folder = _key(path).rstrip("/") + "/"
        with _LOCK:
            keys = list(_STORE)
        return sorted({k[len(folder):].split("/", 1)[0] for k in keys if k.startswith(folder)})

    def exists(self, path: str) -> bool:
        key = _key(path)
        with _LOCK:
            return key in _STORE or any(k.startswith(key.rstrip("/") + "/") for k in _STORE)

    def check_writable(self, path: str) -> None:
        return None

    def move_tree(self, src: str, dst: str) -> list[str]:
        source, target = _key(src).rstrip("/") + "/", _key(dst).rstrip("/") + "/"
        with _LOCK:
            moved = {k: v for k, v in _STORE.items() if k.startswith(source)}
            for key, (data, _) in moved.items():
                del _STORE[key]
                _STORE[target + key[len(source):]] = (data, next(_GENERATIONS))
        return sorted({k[len(source):].split("/", 1)[0] for k in moved})

    def commit_tree(self, src: str, dst: str, names: Sequence[str],
                    keep: Callable[[str], bool],
                    after_each: Callable[[str], None] | None = None) -> None:
        source, target = _key(src).rstrip("/") + "/", _key(dst).rstrip("/") + "/"
        with _LOCK:
            files = {k[len(source):]: v[0] for k, v in _STORE.items() if k.startswith(source)}
        for name in names:
            chosen = {r: d for r, d in files.items() if r.split("/", 1)[0] == name}
            if not chosen:
                raise MissingSourceError(f"cannot commit {src}/{name}: the attempt has no "
                                         "such file or folder any more")
            with _LOCK:
                for relative, data in chosen.items():
                    _STORE[target + relative] = (data, next(_GENERATIONS))
            if after_each is not None:
                after_each(name)
        with _LOCK:
            for key in [k for k in _STORE if k.startswith(target)]:
                relative = key[len(target):]
                top = relative.split("/", 1)[0]
                if not keep(top) and (top not in names or relative not in files):
                    del _STORE[key]

    def copy_tree(self, src: str, dst: str) -> None:
        source, target = _key(src).rstrip("/") + "/", _key(dst).rstrip("/") + "/"
        with _LOCK:
            for key, (data, _) in [kv for kv in _STORE.items() if kv[0].startswith(source)]:
                _STORE[target + key[len(source):]] = (data, next(_GENERATIONS))

    def delete_tree(self, path: str) -> None:
        folder = _key(path).rstrip("/") + "/"
        with _LOCK:
            for key in [k for k in _STORE if k.startswith(folder)]:
                del _STORE[key]

    @staticmethod
    def clear() -> None:
        with _LOCK:
            _STORE.clear()


def _key(path: str) -> str:
    return path[len("memory://"):] if path.startswith("memory://") else path
