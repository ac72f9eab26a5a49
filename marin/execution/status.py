"""What is stored next to each step's output: ``.executor_status`` and ``.executor_info``.

    record = StatusRecord(StepState.SUCCEEDED, run_id="r1", code_fingerprint="ab12...")
    storage.write(status_path(output), record.encode())   # {"status": "SUCCESS", ...}
    StatusRecord.decode(storage.read(status_path(output)).data).status  # StepState.SUCCEEDED

A status or info file that cannot be parsed is reported and treated as absent: the step
runs again, and its output is never deleted.
"""

from __future__ import annotations

import enum
import functools
import getpass
import hashlib
import inspect
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from marin.execution.config_tree import ConfigVisitor, Kind, long_int_problem
from marin.execution.experiments import EXPERIMENT_MODULE_PREFIX
from marin.execution.json_report import json_key
from marin.execution.lease import LeaseRecord, host_name
from marin.execution.states import StepState
from marin.execution.step import join_path

if TYPE_CHECKING:
    from marin.execution.graph import StepNode

STATUS_FILE = ".executor_status"
INFO_FILE = ".executor_info"
LEASE_FILE = ".executor_lease"
COMMIT_FILE = ".executor_commit"
ATTEMPTS_FOLDER = ".attempts"
EXECUTOR_NAMES = (STATUS_FILE, INFO_FILE, LEASE_FILE, COMMIT_FILE, ATTEMPTS_FOLDER)
"""What the executor keeps at the top of a step's output besides the committed files."""


def __getattr__(name: str):
    if name == "StepStatus":  # Marin's name, kept where it was importable from
        from marin.execution.compat import StepStatus

        return StepStatus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CorruptRecordError(ValueError):
    """A stored status or info file could not be parsed."""


@dataclass(frozen=True)
class StatusRecord:
    status: StepState
    """One of RUNNING, SUCCEEDED, FAILED, CANCELLED; stored in its own spelling
    (``StepState.stored``)."""
    run_id: str = ""
    time: float = 0.0
    code_fingerprint: str = ""
    error: str | None = None
    traceback: str | None = None
    host: str = ""
    pid: int = 0
    outputs: list[str] | None = None
    """With SUCCESS: the names the attempt committed at the top of the output folder."""

    def same_as(self, other: StatusRecord) -> bool:
        """The same write of the status (not merely an equal status)."""
        return (self.status, self.run_id, self.time) == (other.status, other.run_id,
                                                           other.time)

    def encode(self) -> bytes:
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # asdict deep-copies
        data["status"] = self.status.stored
        return json.dumps(data, indent=1).encode()

    @classmethod
    def decode(cls, raw: bytes) -> StatusRecord:
        try:
            # Decoding first spares json.loads its encoding detection on bytes.
            data = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
            return cls(
                status=StepState.from_stored(data["status"]),
                run_id=_text(data.get("run_id")),
                time=float(data.get("time", 0.0)),
                code_fingerprint=str(data.get("code_fingerprint", "")),
                error=data.get("error"),
                traceback=data.get("traceback"),
                host=_text(data.get("host")),
                pid=int(data.get("pid", 0)),
                outputs=_names(data.get("outputs")),
            )
        except RecursionError:
            raise CorruptRecordError("not a valid status record (nested too deeply)") from None
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptRecordError(f"not a valid status record ({e})") from e

    @classmethod
    def now(cls, status: StepState, run_id: str, code_fingerprint: str,
            error: str | None = None, traceback: str | None = None,
            outputs: list[str] | None = None) -> StatusRecord:
        return cls(status, run_id, time.time(), code_fingerprint, error, traceback,
                   host_name(), os.getpid(), outputs)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _names(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("outputs must be a list of names")
    return value


def status_path(output_path: str) -> str:
    return join_path(output_path, STATUS_FILE)


def info_path(output_path: str) -> str:
    return join_path(output_path, INFO_FILE)


def lease_path(output_path: str) -> str:
    return join_path(output_path, LEASE_FILE)


def commit_path(output_path: str) -> str:
    return join_path(output_path, COMMIT_FILE)


def attempts_folder(output_path: str) -> str:
    return join_path(output_path, ATTEMPTS_FOLDER)


def attempt_path(output_path: str, run_id: str) -> str:
    """The folder one attempt writes into; committed into ``output_path`` on success."""
    return join_path(output_path, f"{ATTEMPTS_FOLDER}/{run_id}")


def info_record(node: StepNode, config: Any, fingerprint: str, run_id: str) -> dict[str, Any]:
    """The ``.executor_info`` of ``node`` run as ``run_id`` with the resolved ``config``."""
    step = node.step
    return {
        "name": node.name, "key": node.key, "hash": node.hash, "version": node.version,
        "output_path": node.output_path, "description": step.description, "config": config,
        "dependencies": [d.output_path for d in node.dependencies],
        "nonblocking_dependencies": sorted(d.output_path for d in node.nonblocking),
        "fn": function_name(step.fn), "code_fingerprint": fingerprint,
        "git_commit": git_commit(), "user": current_user(), "created": time.time(),
        "run_id": run_id,
    }


def encode_info(info: dict[str, Any]) -> bytes:
    """The JSON of an info record. Configs inside it are walked by ``config_tree``'s rules:
    records become objects, sets sorted arrays, enums their values, anything else with no
    JSON form its ``repr``; a NaN or infinite float, which JSON has no number for, is
    written as its ``repr`` too (``"nan"``, ``"inf"``, ``"-inf"``). An int too long for
    Python to write as text is refused with a ``ValueError`` naming its field."""
    data = _InfoData().visit({k: v for k, v in info.items() if k != "config"}, None)
    if "config" in info:  # walked with its field paths, which a refusal names
        data["config"] = _InfoData().visit(info["config"], "config")
    return json.dumps(data, indent=1, sort_keys=True, allow_nan=False).encode()


def decode_info(raw: bytes) -> dict[str, Any]:
    """The info record in ``raw``; files written before non-finite floats became strings
    (with bare ``NaN`` / ``Infinity``) read as they always did."""
    try:
        info = json.loads(raw)
    except ValueError as e:
        raise CorruptRecordError(f"not valid JSON ({e})") from e
    if not isinstance(info, dict) or "version" not in info:
        raise CorruptRecordError("not an executor info record (no 'version')")
    return info


class _InfoData(ConfigVisitor[Any]):
    """JSON data for an info file: readable, not an identity (that is ``hashing``'s)."""

    def leaf(self, value: Any, path: str | None) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return repr(float(value))
        problem = long_int_problem(value, path) if isinstance(value, int) else None
        if problem is not None:  # too long to write as text: refused, naming the field
            raise ValueError(problem)
        if value is None or isinstance(value, (str, int, float)):
            return value  # json writes these, their subclasses (IntEnum, StrEnum) included
        if isinstance(value, enum.Enum):
            return self.visit(value.value, path)
        return repr(value)

    def marker(self, value: Any, path: str | None) -> Any:
        return repr(value)  # a resolved config holds none; repr keeps a stray one readable

    def container(self, value: Any, kind: Kind, items: list[tuple[Any, Any, Any]],
                  path: str | None) -> Any:
        if kind is Kind.RECORD:
            return {name: result for name, _, result in items}
        if kind is Kind.MAPPING:
            return {json_key(key, repr): result for key, _, result in items}
        if kind is Kind.SET:
            return sorted((result for _, _, result in items),
                          key=lambda r: json.dumps(r, sort_keys=True))
        return [result for _, _, result in items]


@functools.lru_cache(maxsize=4096)
def _fingerprint_of(qualname: str, source: str) -> str:
    return hashlib.sha256(f"{qualname}\n{source}".encode()).hexdigest()[:16]


def code_fingerprint(fn: Any) -> str:
    """A hash of the step function's name and source (its bytecode where the source is
    missing). The module's name is left out: one file run as a script (``__main__``), loaded
    by ``marin executor`` or imported as a module is one function."""
    target = inspect.unwrap(fn)
    qualname = getattr(target, "__qualname__", type(target).__qualname__)
    try:
        source = _source_of(target)
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        source = code.co_code.hex() if code is not None else ""
    return _fingerprint_of(qualname, source)


def function_name(fn: Any) -> str:
    """``module.qualname`` of a step function, naming a script by its path
    (``experiments.hello_pipeline``) however it was loaded."""
    target = inspect.unwrap(fn)
    module = getattr(target, "__module__", None) or "?"
    if module == "__main__" or module.startswith(EXPERIMENT_MODULE_PREFIX):
        spec = getattr(sys.modules.get(module), "__spec__", None)
        path = getattr(sys.modules.get(module), "__file__", None)
        if module == "__main__" and spec is not None and spec.name:
            module = spec.name
        elif path:
            module = _dotted(path)
    return f"{module}.{getattr(target, '__qualname__', '?')}"


def _dotted(path: str) -> str:
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    base = relative if not relative.startswith("..") else os.path.basename(absolute)
    return base.removesuffix(".py").replace(os.sep, ".")


_SOURCE_CACHE: dict[Any, str] = {}


def _source_of(target: Any) -> str:
    key = getattr(target, "__code__", target)
    try:
        return _SOURCE_CACHE[key]
    except (KeyError, TypeError):
        source = inspect.getsource(target)
        try:
            _SOURCE_CACHE[key] = source
        except TypeError:
            pass
        return source


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def release_step(output_path: str, run_id: str, reason: str) -> None:
    """Release a step whose worker a runner stopped from outside (killed its process):
    CANCELLED status, no lease. Does nothing unless ``run_id`` holds the step's lease."""
    from marin.storage import get_storage

    storage = get_storage(output_path)
    path = lease_path(output_path)
    blob = storage.read(path)
    record = None if blob is None else LeaseRecord.decode(blob.data)
    if record is None or record.owner != run_id:
        return
    status = StatusRecord.now(StepState.CANCELLED, run_id, "", error=reason)
    storage.write(status_path(output_path), status.encode())
    storage.delete_if_unchanged(path, blob.token)
