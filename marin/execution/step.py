"""Steps and the placeholders that connect them.

    tokenize = ExecutorStep("tokenized/shakespeare", tokenize_fn,
                            TokenizeConfig(input="data/shakespeare.txt",
                                           cache_path=this_output_path()))
    train = ExecutorStep("train/tiny", train_fn,
                         TrainConfig(data=output_path_of(tokenize, "train"),
                                     learning_rate=3e-3,
                                     log_every=unversioned(10)))

A step's config is any tree of dataclasses, pydantic models, dicts, lists, tuples and sets.
Placeholders inside it are replaced by concrete paths just before ``fn(config)`` runs:

* ``output_path_of(step, sub)`` (or the bare step) becomes ``<that step's output>/<sub>``
  and makes ``step`` a dependency; with ``blocking=False`` one that is started first but
  not waited for;
* ``this_output_path(sub)`` becomes this step's own output path;
* ``versioned(value, version=...)`` hashes ``version`` in place of ``value`` (the way to
  give a callable or other opaque value an identity);
* ``unversioned(value)`` passes ``value`` through but leaves it out of the hash, as does a
  dataclass field declared with ``unversioned_field(...)``;
* a dataclass field declared with ``added_field(default=...)`` is hashed, but left out of
  the hash while it holds its default: adding it to a config moves no existing step key.

A step whose function is declared ``@resumable`` (``train_lm``, ``tokenize``) resumes
from what an earlier attempt left, unless it says ``resumable=False``.

Marin's spellings (``InputName``, ``OutputName``, ``THIS_OUTPUT_PATH``) name the same
objects; they live in ``marin.execution.compat``.
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from marin.execution.fields import (  # noqa: F401  (named here before fields.py)
    ADDED_METADATA_KEY,
    EXTERNAL_METADATA_KEY,
    UNVERSIONED_METADATA_KEY,
    added_field,
    external_path_field,
    is_added_field,
    is_external_path_field,
    is_unversioned_field,
    unversioned_field,
)
from marin.execution.resuming import declares_resumable

ConfigT = TypeVar("ConfigT")
T = TypeVar("T")


class StepDefinitionError(ValueError):
    """A step or placeholder is built with a name or sub-path that cannot be a path under
    the prefix; the message names it and the rule, in one line."""


def check_step_name(name: object) -> None:
    """Refuse a step name that is not a plain relative path of visible parts: an output
    folder is ``<prefix>/<name>-<hash>``, so the name must stay under the prefix, keep out
    of the executor's own folders (``.marin``, ``.attempts``) and print as what it is."""
    if not isinstance(name, str) or not name:
        raise StepDefinitionError(
            f"ExecutorStep name must be a non-empty string, got {name!r}")
    rule = _path_rule_broken(name)
    if rule is None:
        parts = name.split("/")
        if "" in parts:
            rule = "it must have no empty parts ('//') and no leading or trailing '/'"
        elif "." in parts:
            rule = "it must not contain '.' or '..' parts"
        elif any(part.startswith(".") for part in parts):
            rule = ("no part may start with '.': the executor keeps its own files there "
                    "(.marin, .attempts, .executor_status)")
    if rule is not None:
        raise StepDefinitionError(f"ExecutorStep name {name!r}: {rule}")


def _path_rule_broken(text: str) -> str | None:
    """The rule a name or sub-path breaks that applies to both, or None."""
    if "://" in text or (len(text) > 1 and text[1] == ":" and text[0].isalpha()):
        return "it must be a relative path, not a URL or a drive"
    if text.startswith(("/", "~")):
        return "it must be a relative path, not an absolute one"
    if ".." in text.replace("\\", "/").split("/"):
        return "it must not contain '.' or '..' parts"
    bad = next((c for c in text if unicodedata.category(c) in _INVISIBLE), None)
    if bad is not None:
        return (f"it contains the control or formatting character U+{ord(bad):04X}, which "
                "listings would not show as it is (newlines, tabs, bidirectional overrides)")
    return None


#: Unicode categories refused in names: controls, formatting (bidirectional overrides,
#: zero-width characters), line and paragraph separators, surrogates.
_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


#: ``StepResources.placement`` values: how a gang's hosts are spread over a Ray cluster's
#: nodes (Ray's placement-group strategies, lower case).
PLACEMENTS = ("pack", "spread", "strict_pack", "strict_spread")


@dataclass(frozen=True)
class StepResources:
    """What one run of a step needs; runners that schedule (Ray) honour it. Where and how a
    step runs, never what it computes: resources are not part of a step's identity, so a
    1-host and a 2-host run of one config are one step.

    Attributes:
        cpus: CPU cores (per host).
        gpus: GPUs (per host).
        tpu: TPU type (for example ``"v5e-8"``), or None.
        memory_gb: host memory in GiB (per host), or None for the runner's default.
        hosts: processes the step runs as, one per host, started together as one gang
            (``jax.distributed``; docs/executor.md, "Resources and multi-host steps"). The
            local runner starts them all on this machine.
        placement: how the Ray runner spreads a gang over the cluster's nodes: ``"pack"``
            (few nodes), ``"spread"``, ``"strict_pack"`` (one node) or ``"strict_spread"``
            (one host per node: what real hosts need).
    """

    cpus: float = 1.0
    gpus: float = 0.0
    tpu: str | None = None
    memory_gb: float | None = None
    hosts: int = 1
    placement: str = "pack"

    def __post_init__(self) -> None:
        if isinstance(self.hosts, bool) or not isinstance(self.hosts, int) or self.hosts < 1:
            raise StepDefinitionError(
                f"StepResources.hosts must be a whole number of at least 1, got "
                f"{self.hosts!r}: use hosts=1 for a step that runs in one process")
        if self.placement not in PLACEMENTS:
            raise StepDefinitionError(
                f"StepResources.placement must be one of {', '.join(PLACEMENTS)}, got "
                f"{self.placement!r}: use 'strict_spread' for one host per node")


@dataclass(frozen=True)
class ComputeEstimate:
    """A step's declared cost, summed by the dry run.

    Attributes:
        flops: floating-point operations the step performs.
        device_hours: accelerator hours on the hardware it was planned for.
    """

    flops: float = 0.0
    device_hours: float = 0.0

    def __post_init__(self) -> None:
        for name in ("flops", "device_hours"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and value >= 0):
                raise StepDefinitionError(f"ComputeEstimate {name} must be a finite number of "
                                          f"at least 0, got {value!r}")


@dataclass(frozen=True, eq=False)
class ExecutorStep(Generic[ConfigT]):
    """One unit of work: ``fn(config)`` with every placeholder in ``config`` resolved.

    Attributes:
        name: the step's name; its output lives at ``<prefix>/<name>-<hash>``. Slashes group
            outputs into folders (``"tokenized/shakespeare"``).
        fn: the function that does the work. It receives the resolved config and writes its
            results under the config's ``this_output_path()``.
        config: the step's configuration (usually a frozen dataclass).
        description: a line for the dry run and the info file.
        resources: what the runner must reserve for the step.
        estimate: the step's declared compute, totalled by the dry run.
        resumable: each attempt writes into a folder of its own, committed into the output
            only on success; a resumable step's new attempt starts from a copy of the latest
            unfinished attempt's files and keeps what the attempts published (checkpoints,
            a token cache's finished shards). None (the default): what ``fn`` declares
            with ``@resumable`` (``train_lm`` and ``tokenize`` do); False: every attempt
            starts afresh; True: resume although ``fn`` does not declare it.
    """

    name: str
    fn: Callable[[ConfigT], Any]
    config: ConfigT
    description: str | None = None
    resources: StepResources = field(default_factory=StepResources)
    estimate: ComputeEstimate | None = None
    resumable: bool | None = None

    def __post_init__(self) -> None:
        check_step_name(self.name)
        if not callable(self.fn):
            raise TypeError(f"ExecutorStep {self.name!r}: fn must be callable, got {self.fn!r}")
        if not (self.resumable is None or isinstance(self.resumable, bool)):
            raise StepDefinitionError(
                f"ExecutorStep {self.name!r}: resumable must be True, False or None (what "
                f"the function declares), got {self.resumable!r}")

    @property
    def resumes(self) -> bool:
        """Whether a new attempt resumes: ``resumable`` when given, else what ``fn``
        declares (``@resumable``)."""
        return declares_resumable(self.fn) if self.resumable is None else self.resumable

    def with_config(self, config: ConfigT) -> ExecutorStep[ConfigT]:
        return dataclasses.replace(self, config=config)

    def cd(self, sub: str) -> OutputPathOf:
        """``output_path_of(self, sub)``, as Marin spells it (also ``self / sub``)."""
        return OutputPathOf(self, sub)

    def __truediv__(self, sub: str) -> OutputPathOf:
        return OutputPathOf(self, sub)

    def __repr__(self) -> str:
        return f"ExecutorStep(name={self.name!r}, fn={getattr(self.fn, '__qualname__', self.fn)})"


@dataclass(frozen=True, init=False)
class OutputPathOf:
    """Placeholder for the output path of another step (plus an optional sub-path).

    ``InputName`` is this class under Marin's name, so Marin's spellings build it too:
    ``InputName(step, "numbers.json")``, ``InputName(step=step, name=None)``,
    ``step / "numbers.json"``, ``step.cd("numbers.json")``.

    ``blocking=False`` (Marin: ``block_on_step=False``, ``.nonblocking()``) makes ``step``
    a dependency that is not waited for: the step holding the placeholder starts once
    ``step`` has started, and may read what it publishes while it runs (a run's
    checkpoints). It hashes and resolves exactly as a blocking one (docs/executor.md,
    "Nonblocking dependencies").
    """

    step: ExecutorStep
    sub: str = ""
    blocking: bool = True

    def __init__(self, step: ExecutorStep, sub: str | None = "", *,
                 name: str | None = None, block_on_step: bool = True):
        if not isinstance(step, ExecutorStep):
            raise TypeError(
                f"output_path_of / InputName expects an ExecutorStep, got {type(step).__name__}; "
                "for a path outside the pipeline, pass the path string itself")
        if name is not None:
            if sub:
                raise TypeError("InputName: give the sub-path once, as sub or as name")
            sub = name
        if not isinstance(block_on_step, bool):
            raise TypeError(f"output_path_of({step.name!r}, ...): block_on_step must be True "
                            f"or False, got {block_on_step!r}")
        object.__setattr__(self, "step", step)
        where = f"output_path_of({step.name!r}, ...)"
        object.__setattr__(self, "sub", check_sub_path(sub or "", where))
        object.__setattr__(self, "blocking", block_on_step)

    @property
    def name(self) -> str | None:
        """Marin's name of the sub-path (None for the output folder itself)."""
        return self.sub or None

    def __truediv__(self, sub: str) -> OutputPathOf:
        return OutputPathOf(self.step, _join(self.sub, check_sub_path(sub, "output_path / sub")),
                            block_on_step=self.blocking)

    def cd(self, sub: str) -> OutputPathOf:
        """``self / sub``, as Marin spells it."""
        return self / sub

    def nonblocking(self) -> OutputPathOf:
        """This placeholder as a dependency that is not waited for (Marin's spelling of
        ``output_path_of(step, sub, blocking=False)``)."""
        return OutputPathOf(self.step, self.sub, block_on_step=False)

    def of_step(self, step: ExecutorStep) -> OutputPathOf:
        """This placeholder pointing at ``step`` instead (same sub-path, same blocking)."""
        return OutputPathOf(step, self.sub, block_on_step=self.blocking)

    @staticmethod
    def hardcoded(path: str) -> Any:
        raise ValueError(
            f"InputName.hardcoded({path!r}): a path that no step produces is a plain string "
            "here: put the path itself in the config (an absolute path or URL), and declare "
            "the field with external_path_field() if overrides may point it elsewhere")


@dataclass(frozen=True, init=False)
class ThisOutputPath:
    """Placeholder for the output path of the step whose config holds it.

    ``OutputName`` is this class under Marin's name (``OutputName(name="stats")``)."""

    sub: str = ""

    def __init__(self, sub: str | None = "", *, name: str | None = None):
        if name is not None:
            if sub:
                raise TypeError("OutputName: give the sub-path once, as sub or as name")
            sub = name
        object.__setattr__(self, "sub", check_sub_path(sub or "", "this_output_path(...)"))

    @property
    def name(self) -> str | None:
        """Marin's name of the sub-path (None for the output folder itself)."""
        return self.sub or None




@dataclass(frozen=True)
class VersionedValue(Generic[T]):
    """A value whose hash identity is ``version`` (or the value itself when None)."""

    value: T
    version: Any = None


@dataclass(frozen=True)
class UnversionedValue(Generic[T]):
    """A value passed to the step but left out of its hash."""

    value: T


def output_path_of(step: ExecutorStep, sub: str | None = "", *,
                   name: str | None = None, blocking: bool = True) -> Any:
    """The output path of ``step`` (joined with ``sub``); makes ``step`` a dependency.
    ``name=`` is Marin's spelling of ``sub``. ``blocking=False``: a dependency that is
    started first but not waited for (docs/executor.md, "Nonblocking dependencies")."""
    return OutputPathOf(step, sub, name=name, block_on_step=blocking)


def this_output_path(sub: str | None = "", *, name: str | None = None) -> Any:
    """The output path of the step being configured (joined with ``sub``; ``name=`` is
    Marin's spelling)."""
    return ThisOutputPath(sub, name=name)


def versioned(value: T, version: Any = None) -> T:
    """Mark ``value`` as part of the step's identity.

    With ``version`` given, the hash uses ``version`` instead of ``value``: this is how a
    callable or another value with no canonical form gets a stable identity. A versioned
    value inside an ``unversioned_field`` is hashed all the same.
    """
    return VersionedValue(value, version)  # type: ignore[return-value]


def unversioned(value: T) -> T:
    """Pass ``value`` to the step but leave it out of the step's hash (logging cadence,
    number of workers, anything that does not change the result)."""
    return UnversionedValue(value)  # type: ignore[return-value]


def check_sub_path(sub: str, where: str) -> str:
    """``sub`` when it is a relative path inside an output; StepDefinitionError otherwise."""
    if not isinstance(sub, str):
        raise TypeError(f"{where}: the sub-path must be a string, got {type(sub).__name__}")
    rule = _path_rule_broken(sub)
    if rule is not None:
        raise StepDefinitionError(f"{where}: sub-path {sub!r} must stay inside the output: "
                                  f"{rule}")
    return sub


def _join(base: str, sub: str) -> str:
    if not sub:
        return base
    if not base:
        return sub.strip("/")
    return f"{base.rstrip('/')}/{sub.strip('/')}"


def join_path(base: str, sub: str) -> str:
    """Join a storage path or URL with a relative sub-path."""
    return _join(base, sub) if sub else base
