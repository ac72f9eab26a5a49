"""What dominates a profiled training step: kernels, time categories, steps, hints.

    from marin.profiling import trace_summary
    summary = trace_summary.load("gs://my-bucket/traces/run_2024_08_27.xplane")
    for name, seconds in summary.top_kernels(3):
        print(f"{name}: {seconds:.2f}s")
    summary.breakdown()["communication"].fraction     # share of the profiled steps
    summary.steps().steady_median                      # seconds, first step left out
    for hint in summary.hints(): print(hint.message)
    print(summary.compare(trace_summary.load("after/")).to_json())

``load`` takes any fsspec URL or path: an XPlane file (``.xplane.pb``, or the same bytes
named ``.xplane``), a profile folder as ``jax.profiler`` writes it (the newest run, every
host's file merged), or a training step's output folder (its ``profile/``). The file is
read as a stream in bounded pieces (see ``_wire``) and parsed by jaxlib's
``jax.profiler.ProfileData``. Sections from every ``marin.trace_analyzers`` plugin (the
built-in kernels, categories, steps and hints analyzers among them) make up ``to_json()``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from marin.profiling._collect import CATEGORIES, Collector, TraceData
from marin.profiling._sources import TraceError, host_of, resolve
from marin.profiling._wire import WireError, split_xspace
from marin.profiling.hints import (  # noqa: F401 - the thresholds' documented home
    COMMUNICATION_THRESHOLD,
    DATA_LOADING_THRESHOLD,
    DOMINANT_KERNEL_THRESHOLD,
    FIRST_STEP_THRESHOLD,
    HOST_THRESHOLD,
    IDLE_THRESHOLD,
    STEP_SPREAD_THRESHOLD,
    Hint,
)
from marin.storage.files import url_of

__all__ = ["CATEGORIES", "Hint", "Kernel", "Share", "StepStats", "TraceComparison",
           "TraceError", "TraceSummary", "load"]

# The most serialized bytes handed to the parser at once: its messages take about ten
# times their serialized size, so 8 MB pieces hold the parser near 100 MB.
PIECE_BYTES = 8 << 20


def load(url: str, top: int = 10) -> TraceSummary:
    """Summarise the trace at ``url`` (file, profile folder, or step output folder)."""
    fs, files = resolve(url)
    collector = Collector(multi_host=len(files) > 1)
    for path in files:
        _read_file(fs, path, collector)
    data = collector.finish()
    if not any(p.startswith(("/host:", "/device:")) for p in data.planes):
        raise TraceError(f"{url_of(fs, files[0])}: no host or device planes in this file; it is "
                         "not a profile that jax.profiler wrote")
    return TraceSummary(data, sources=tuple(url_of(fs, f) for f in files), top=top)


def _read_file(fs: Any, path: str, collector: Collector) -> None:
    from jax.profiler import ProfileData

    url = url_of(fs, path)
    size = fs.size(path)
    if not size:
        raise TraceError(f"{url}: empty file; the profile was not written completely (was "
                         "jax.profiler.stop_trace called?)")
    host = host_of(path)
    try:
        with fs.open(path, "rb") as f:
            for piece in split_xspace(f, size, PIECE_BYTES):
                try:
                    profile = ProfileData.from_serialized_xspace(piece)
                except Exception as e:  # jaxlib raises its own status errors
                    raise WireError(f"jaxlib could not parse it ({str(e).splitlines()[0]})"
                                    ) from None
                collector.add(host, profile)
                del profile
    except WireError as e:
        raise TraceError(f"{url}: not a readable XPlane trace: {e}; pass an intact "
                         ".xplane.pb written by jax.profiler") from None
    except OSError as e:
        raise TraceError(f"cannot read {url}: {e}") from None




class Kernel(tuple):
    """``(name, seconds)`` so that ``for name, seconds in top_kernels(3)`` works; also
    ``.count`` (occurrences, over all devices) and ``.category``."""

    def __new__(cls, name: str, seconds: float, count: int, category: str) -> Kernel:
        kernel = super().__new__(cls, (name, seconds))
        kernel.count, kernel.category = count, category
        return kernel

    @property
    def name(self) -> str:
        return self[0]

    @property
    def seconds(self) -> float:
        return self[1]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "seconds": self.seconds, "count": self.count,
                "category": self.category}


class Share(NamedTuple):
    seconds: float  # per device, averaged over devices
    fraction: float  # of the window (the profiled steps)


@dataclass(frozen=True)
class StepStats:
    """Wall times of the profiled steps, in seconds.

    Attributes:
        numbers: the step numbers the markers carried.
        times: each step's wall time.
        steady_*: over the steps after the first (the first often includes compilation).
    """

    numbers: tuple[int, ...]
    times: tuple[float, ...]
    mean: float
    median: float
    p90: float
    steady_mean: float
    steady_median: float
    steady_p90: float

    @property
    def count(self) -> int:
        return len(self.times)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "count": self.count}


class TraceSummary:
    """The summary of one trace; see the module's docstring."""

    def __init__(self, data: TraceData, sources: tuple[str, ...] = (), top: int = 10):
        self.data = data
        self.sources = sources
        self.top = top
        self.analyzer_errors: list[str] = []

    @property
    def platform(self) -> str:
        """``gpu``, ``tpu`` or ``cpu`` (a CPU-only trace: XLA ops on host threads)."""
        return self.data.platform

    @property
    def devices(self) -> list[str]:
        return list(self.data.devices)

    def top_kernels(self, n: int = 10) -> list[Kernel]:
        """Device ops by total time (seconds, summed over devices), longest first."""
        ranked = sorted(self.data.kernels.items(), key=lambda kv: (-kv[1][1], kv[0]))
        return [Kernel(name, ns / 1e9, count, category)
                for name, (count, ns, category) in ranked[:n]]

    @property
    def kernel_seconds(self) -> float:
        """Total time of all device ops, summed over devices."""
        return sum(ns for _, ns, _ in self.data.kernels.values()) / 1e9

    @property
    def window_seconds(self) -> float:
        """The time the breakdown divides: the profiled steps, else first to last op."""
        return self.data.window_ns / 1e9

    def breakdown(self) -> dict[str, Share]:
        """Seconds and fractions of the window per category, averaged over devices."""
        shares = self.data.shares
        window = self.data.window_ns
        out = {}
        for category in CATEGORIES:
            ns = float(np.mean([s[category] for s in shares.values()])) if shares else 0.0
            out[category] = Share(ns / 1e9, ns / window if window else 0.0)
        return out

    @property
    def overlapped_communication_seconds(self) -> float:
        """Collective time hidden under compute (not in ``breakdown``), per device."""
        values = list(self.data.overlapped_communication.values())
        return float(np.mean(values)) / 1e9 if values else 0.0

    def steps(self) -> StepStats:
        """Per-step wall times from the step markers (``StepTraceAnnotation``)."""
        steps = self.data.steps
        times = np.array([(e - s) / 1e9 for _, s, e in steps])
        steady = times[1:] if len(times) > 1 else times

        def stat(fn, values):
            return float(fn(values)) if len(values) else math.nan

        return StepStats(numbers=tuple(n for n, _, _ in steps), times=tuple(times.tolist()),
                         mean=stat(np.mean, times), median=stat(np.median, times),
                         p90=stat(lambda v: np.percentile(v, 90), times),
                         steady_mean=stat(np.mean, steady), steady_median=stat(np.median, steady),
                         steady_p90=stat(lambda v: np.percentile(v, 90), steady))

    def hints(self) -> list[Hint]:
        """Suggestions whose evidence passes a documented threshold (module constants)."""
        from marin.profiling.hints import builtin_hints

        return builtin_hints(self)

    def compare(self, other: TraceSummary, top: int | None = None) -> TraceComparison:
        """Deltas from this trace (before) to ``other`` (after)."""
        return TraceComparison(self, other, top or self.top)

    @cached_property
    def sections(self) -> dict[str, Any]:
        """One section per ``marin.trace_analyzers`` plugin; a failing one is isolated."""
        from marin.profiling.analyzers import run_analyzers

        sections, errors = run_analyzers(self)
        self.analyzer_errors = errors
        return sections

    def to_json(self) -> dict[str, Any]:
        return {"sources": list(self.sources), "platform": self.platform,
                "devices": self.devices, "hosts": list(self.data.hosts),
                "events": self.data.events, "window_seconds": self.window_seconds,
                "sections": self.sections, "analyzer_errors": list(self.analyzer_errors)}


class TraceComparison:
    """Per category and per top kernel: before, after and the change."""

    def __init__(self, before: TraceSummary, after: TraceSummary, top: int = 10):
        self.before, self.after = before, after
        b, a = before.breakdown(), after.breakdown()
        self.categories = {c: {"before_seconds": b[c].seconds, "after_seconds": a[c].seconds,
                               "delta_seconds": a[c].seconds - b[c].seconds,
                               "before_fraction": b[c].fraction, "after_fraction": a[c].fraction,
                               "delta_fraction": a[c].fraction - b[c].fraction}
                           for c in CATEGORIES}
        kb = {k.name: k for k in before.top_kernels(top)}
        ka = {k.name: k for k in after.top_kernels(top)}
        names = list(dict.fromkeys([*kb, *ka]))
        all_b, all_a = before.data.kernels, after.data.kernels
        self.kernels = {}
        for name in names:
            sb = all_b[name][1] / 1e9 if name in all_b else 0.0
            sa = all_a[name][1] / 1e9 if name in all_a else 0.0
            self.kernels[name] = {"before_seconds": sb, "after_seconds": sa,
                                  "delta_seconds": sa - sb,
                                  "ratio": sa / sb if sb else math.inf}
        sb, sa = before.steps(), after.steps()
        self.steps = {"before_median": sb.steady_median, "after_median": sa.steady_median,
                      "speedup": sb.steady_median / sa.steady_median
                      if sa.count and sb.count and sa.steady_median else math.nan}

    def to_json(self) -> dict[str, Any]:
        def clean(value):
            return None if isinstance(value, float) and not math.isfinite(value) else value

        return {"before": list(self.before.sources), "after": list(self.after.sources),
                "categories": self.categories,
                "kernels": {k: {f: clean(v) for f, v in d.items()}
                            for k, d in self.kernels.items()},
                "steps": {k: clean(v) for k, v in self.steps.items()}}
