"""One pass over the events of an XPlane trace, keeping totals and merged intervals only.

    data = collect([("host0", ProfileData.from_file(path))])
    data.platform, data.kernels["fusion.3"], data.shares["/device:GPU:0"]["compute"]

Planes, as the profiler names them (tsl ``xplane_schema``):
- ``/device:GPU:N``: the raw CUPTI timeline; kernels and copies on ``Stream #...`` lines.
- ``/device:TPU:N``: HLO ops on the ``XLA Ops`` line, step markers on the ``Steps`` line.
- ``/host:CPU``: one line per host thread. On a CPU-only run the XLA ops (events carrying
  an ``hlo_op`` stat, with the ``device_ordinal`` they ran for) are the device work;
  ``StepTraceAnnotation`` events carry a ``step_num`` stat; ``marin.data/...`` scopes (and
  tf.data/grain iterator events) are data loading; everything else is host work.

Op names differ across backends and versions (a jitted matmul on CPU is a YNNPACK
``ynn_fusion``), so an op is classed by its stats, and an op is communication when its HLO
name or category (``hlo_op``, ``hlo_category``, else the event name) is a collective.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CATEGORIES = ("compute", "communication", "data_loading", "host", "idle")
# XLA's collective opcodes (also in GPU kernel names, NCCL's among them) and the JAX
# primitives that instruction names come from on CPU (``psum_invariant.7``).
_COLLECTIVE = re.compile(
    r"all[-_]?reduce|all[-_]?gather|reduce[-_]?scatter|all[-_]?to[-_]?all|"
    r"collective[-_]?permute|collective[-_]?broadcast|(?<![a-z])(send|recv)(?![a-z])|nccl|"
    r"(?<![a-z])(psum|pmax|pmin|pmean|ppermute|pbroadcast|psum_scatter)", re.IGNORECASE)
DATA_PREFIXES = ("marin.data", "Iterator::", "grain", "tf_data")
_GPU, _TPU, _HOST = "/device:GPU:", "/device:TPU:", "/host:CPU"
_TPU_OPS_LINE, _TPU_STEPS_LINE = "XLA Ops", "Steps"
_GPU_STREAM = "Stream"

# host event kinds
_XLA, _STEP, _DATA, _WORK, _SKIP = range(5)


def is_collective(*names: str | None) -> bool:
    return any(n and _COLLECTIVE.search(n) for n in names)


class _Spans:
    """Intervals gathered as flat start/end pairs, merged in bulk."""

    __slots__ = ("merged", "pending")

    def __init__(self):
        self.pending = array("d")
        self.merged: list[np.ndarray] = []

    def flush(self) -> None:
        """Merge what is pending; the buffer is emptied in place (callers keep it)."""
        if self.pending:
            view = np.frombuffer(self.pending, dtype=np.float64).reshape(-1, 2)
            spans = view.copy()
            del view
            del self.pending[:]
            self.merged.append(merge(spans))

    def result(self) -> np.ndarray:
        self.flush()
        if not self.merged:
            return np.zeros((0, 2))
        out = merge(np.concatenate(self.merged))
        self.merged = [out]
        return out


def merge(spans: np.ndarray) -> np.ndarray:
    """Sorted disjoint intervals covering the same time as ``spans`` (n x 2)."""
    if len(spans) == 0:
        return spans
    spans = spans[np.argsort(spans[:, 0], kind="stable")]
    ends = np.maximum.accumulate(spans[:, 1])
    new = np.empty(len(spans), dtype=bool)
    new[0] = True
    new[1:] = spans[1:, 0] > ends[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(spans) - 1)
    return np.stack([spans[first, 0], ends[last]], axis=1)


@dataclass
class TraceData:
    """What a summary needs from a trace: per-op totals, per-device shares, steps."""

    platform: str
    hosts: list[str]
    devices: list[str]
    kernels: dict[str, tuple[int, float, str]]  # name -> (count, total ns, category)
    shares: dict[str, dict[str, float]]  # device -> category -> ns within the window
    overlapped_communication: dict[str, float]  # device -> ns of collectives under compute
    window_ns: float
    steps: list[tuple[int, float, float]]  # (step number, start ns, end ns)
    events: int
    planes: list[str] = field(default_factory=list)


class Collector:
    """Feed it ``(host, ProfileData)`` pieces, then call ``finish()``."""

    def __init__(self, multi_host: bool = False):
        self.multi_host = multi_host
        self.events = 0
        self.planes: set[str] = set()
        self.device_ops: dict[str, list[Any]] = {}
        self.cpu_ops: dict[str, list[Any]] = {}
        self.busy: dict[tuple[str, int], _Spans] = {}
        self.cpu_busy: dict[tuple[str, int], _Spans] = {}
        self.data: dict[str, _Spans] = {}
        self.work: dict[str, _Spans] = {}
        self.device_host: dict[str, str] = {}
        self.host_steps: dict[int, list[float]] = {}
        self.device_steps: dict[int, list[float]] = {}
        self._device_kind: dict[str, int] = {}
        self._host_kind: dict[str, int] = {}
        self._cpu_targets: dict[tuple[str, str, int], tuple[list[Any], array]] = {}
        self.hosts: list[str] = []

    def add(self, host: str, profile: Any) -> None:
        if host not in self.hosts:
            self.hosts.append(host)
        for plane in profile.planes:
            name = plane.name
            self.planes.add(name)
            if name.startswith(_GPU):
                self._device_plane(host, name, plane, lambda n: n.startswith(_GPU_STREAM))
            elif name.startswith(_TPU):
                self._device_plane(host, name, plane, lambda n: n == _TPU_OPS_LINE)
            elif name == _HOST:
                for line in plane.lines:
                    self._host_line(host, line)

    # -- accelerators ------------------------------------------------------------------
    def _device_plane(self, host: str, plane_name: str, plane: Any, is_op_line) -> None:
        device = f"{host}{plane_name}" if self.multi_host else plane_name
        self.device_host[device] = host
        for line in plane.lines:
            if is_op_line(line.name):
                self._device_line(device, line)
            elif line.name == _TPU_STEPS_LINE:
                for e in line.events:
                    if e.name.strip().isdigit():
                        _add_step(self.device_steps, int(e.name), e.start_ns,
                                  e.start_ns + e.duration_ns)

    def _device_line(self, device: str, line: Any) -> None:
        kinds, ops = self._device_kind, self.device_ops
        spans = (self._spans(self.busy, (device, 0)), self._spans(self.busy, (device, 1)))
        bufs = (spans[0].pending, spans[1].pending)
        n = 0
        for e in line.events:
            n += 1
            name = e.name
            kind = kinds.get(name)
            if kind is None:
                stats = dict(e.stats)
                kind = kinds[name] = int(is_collective(stats.get("hlo_op"),
                                                       stats.get("hlo_category"), name))
            start, duration = e.start_ns, e.duration_ns
            op = ops.get(name)
            if op is None:
                op = ops[name] = [0, 0.0, kind]
            op[0] += 1
            op[1] += duration
            buf = bufs[kind]
            buf.append(start)
            buf.append(start + duration)
        self.events += n
        spans[0].flush()
        spans[1].flush()

    # -- host threads ------------------------------------------------------------------
    def _host_line(self, host: str, line: Any) -> None:
        kinds = self._host_kind
        data = self._spans(self.data, host)
        work = self._spans(self.work, host)
        data_buf, work_buf = data.pending, work.pending
        # Host work is merged on the fly: most host events nest in one another (Python
        # calls, dispatch), and events on a line come sorted by start. An event out of
        # order only starts a new interval; the final merge sorts.
        lo = hi = -1.0
        n = 0
        for e in line.events:
            n += 1
            name = e.name
            kind = kinds.get(name)
            if kind is None:
                kind = kinds[name] = _host_kind(name, dict(e.stats))
            if kind == _WORK:
                start, end = e.start_ns, e.end_ns
                if start >= lo and end <= hi:
                    continue
                if lo <= start <= hi:
                    hi = end
                else:
                    if hi > lo:
                        work_buf.append(lo)
                        work_buf.append(hi)
                    lo, hi = start, end
            elif kind == _XLA:
                self._cpu_op(host, name, e)
            elif kind == _DATA:
                data_buf.append(e.start_ns)
                data_buf.append(e.end_ns)
            elif kind == _STEP:
                step = dict(e.stats).get("step_num")
                if step is not None:
                    _add_step(self.host_steps, int(step), e.start_ns, e.end_ns)
        if hi > lo:
            work_buf.append(lo)
            work_buf.append(hi)
        self.events += n
        data.flush()
        work.flush()
        for spans in self.cpu_busy.values():
            spans.flush()

    def _cpu_op(self, host: str, name: str, e: Any) -> None:
        stats = e.stats
        ordinal = 0
        for key, value in stats:
            if key == "device_ordinal":
                ordinal = value
                break
        target = self._cpu_targets.get((host, name, ordinal))
        if target is None:
            target = self._cpu_target(host, name, ordinal, dict(stats))
        op, buf = target
        start, end = e.start_ns, e.end_ns
        op[0] += 1
        op[1] += end - start
        buf.append(start)
        buf.append(end)

    def _cpu_target(self, host: str, name: str, ordinal: int, stats: dict[str, Any]
                    ) -> tuple[list[Any], array]:
        """The op's totals and its device's interval buffer, cached by event name."""
        op_name = stats.get("hlo_op") or name
        op = self.cpu_ops.get(op_name)
        if op is None:
            op = self.cpu_ops[op_name] = [0, 0.0, int(is_collective(
                op_name, stats.get("hlo_category")))]
        device = f"{host if self.multi_host else ''}/cpu:{int(ordinal or 0)}"
        self.device_host[device] = host
        spans = self._spans(self.cpu_busy, (device, op[2]))
        target = self._cpu_targets[(host, name, ordinal)] = (op, spans.pending)
        return target

    @staticmethod
    def _spans(table: dict, key: Any) -> _Spans:
        spans = table.get(key)
        if spans is None:
            spans = table[key] = _Spans()
        return spans

    # -- result ------------------------------------------------------------------------
    def finish(self) -> TraceData:
        if any(p.startswith(_GPU) for p in self.planes):
            platform = "gpu"
        elif any(p.startswith(_TPU) for p in self.planes):
            platform = "tpu"
        else:
            platform = "cpu"
        if platform == "cpu":
            ops, busy = self.cpu_ops, self.cpu_busy
        else:
            ops, busy = self.device_ops, self.busy
            for (device, _), spans in self.cpu_busy.items():  # host-side XLA work
                self._spans(self.work, self.device_host[device]).merged.append(spans.result())
        devices = sorted({d for d, _ in busy})
        steps = self.host_steps or self.device_steps
        step_list = sorted((n, s, e) for n, (s, e) in steps.items())
        busy_result = {key: spans.result() for key, spans in busy.items()}
        window = self._window(step_list, busy_result)
        shares, overlapped = {}, {}
        empty = np.zeros((0, 2))
        for device in devices:
            host = self.device_host[device]
            shares[device], overlapped[device] = _shares(
                window, busy_result.get((device, 0), empty), busy_result.get((device, 1), empty),
                self.data[host].result() if host in self.data else empty,
                self.work[host].result() if host in self.work else empty)
        kernels = {name: (c, ns, "communication" if k else "compute")
                   for name, (c, ns, k) in ops.items()}
        return TraceData(platform=platform, hosts=list(self.hosts), devices=devices,
                         kernels=kernels, shares=shares, overlapped_communication=overlapped,
                         window_ns=float(np.sum(window[:, 1] - window[:, 0])) if len(window)
                         else 0.0, steps=step_list, events=self.events,
                         planes=sorted(self.planes))

    @staticmethod
    def _window(steps: list[tuple[int, float, float]],
                busy: dict[tuple[str, int], np.ndarray]) -> np.ndarray:
        """The profiled steps; without step markers, first to last device op."""
        if steps:
            return merge(np.array([[s, e] for _, s, e in steps], dtype=np.float64))
        spans = [b for b in busy.values() if len(b)]
        if not spans:
            return np.zeros((0, 2))
        return np.array([[min(b[0, 0] for b in spans), max(b[-1, 1] for b in spans)]])


def _host_kind(name: str, stats: dict[str, Any]) -> int:
    if "hlo_op" in stats:
        return _XLA
    if "step_num" in stats:
        return _STEP
    if name.startswith(DATA_PREFIXES):
        return _DATA
    if name.startswith("end: "):
        return _SKIP
    return _WORK


def _add_step(table: dict[int, list[float]], step: int, start: float, end: float) -> None:
    span = table.get(step)
    if span is None:
        table[step] = [start, end]
    else:
        span[0], span[1] = min(span[0], start), max(span[1], end)


def _shares(window: np.ndarray, compute: np.ndarray, comm: np.ndarray, data: np.ndarray,
            work: np.ndarray) -> tuple[dict[str, float], float]:
    """Split the window's time on one device; the first category that applies wins:
    compute, communication (not under compute), data loading, host work, idle."""
    sets = [window, compute, comm, data, work]
    times = np.unique(np.concatenate([s.ravel() for s in sets]))
    if len(times) < 2:
        return {c: 0.0 for c in CATEGORIES}, 0.0
    lengths = np.diff(times)
    w, c, m, d, h = (_covered(times, s) for s in sets)
    free = w & ~c & ~m
    out = {"compute": lengths[w & c].sum(), "communication": lengths[w & m & ~c].sum(),
           "data_loading": lengths[free & d].sum(), "host": lengths[free & ~d & h].sum(),
           "idle": lengths[free & ~d & ~h].sum()}
    return {k: float(v) for k, v in out.items()}, float(lengths[w & m & c].sum())


def _covered(times: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """For each segment [times[i], times[i+1]): whether ``spans`` covers it."""
    n = len(times)
    if len(spans) == 0:
        return np.zeros(n - 1, dtype=bool)
    opens = np.bincount(np.searchsorted(times, spans[:, 0]), minlength=n + 1)
    closes = np.bincount(np.searchsorted(times, spans[:, 1]), minlength=n + 1)
    return np.cumsum(opens - closes)[:n - 1] > 0


def collect(pieces: Iterable[tuple[str, Any]], multi_host: bool = False) -> TraceData:
    collector = Collector(multi_host)
    for host, profile in pieces:
        collector.add(host, profile)
    return collector.finish()
