"""The runner API: what a runner plugin needs, and nothing else.

    from marin.execution.runners import Runner, StepJob, StepOutcome, execute_step

    class ThreadRunner:                       # a runner plugin, in a few lines
        name = "threads"
        options = {}                          # the KEY=VALUE runner options it accepts
        def __init__(self, max_concurrent: int = 1): ...
        def submit(self, job: StepJob, resources) -> Future[StepOutcome]:
            return self.pool.submit(execute_step, job)      # here or in another process
        def cancel_running(self, reason: str) -> list[str]: ...   # see below
        def shutdown(self) -> None: ...

    # pyproject.toml: [project.entry-points."marin.runners"] threads = "my_pkg:ThreadRunner"

A runner only places work. ``execute_step(job)`` is the worker protocol: it takes the step's
lease, writes ``.executor_info`` and RUNNING, runs the step into its attempt folder, commits
it under a compare-and-swap on the lease, writes SUCCEEDED or FAILED and releases the lease.

The lease guarantee: a step's function runs only inside ``execute_step`` and only while its
lease is held, so executors sharing a prefix run each step once, whatever their runners. A
runner must hand every job to ``execute_step`` (in this process or another one that can
unpickle the job) and never call ``job.fn`` itself.

Cancellation has one owner, the runner. After Ctrl-C (or TERM, HUP) the executor calls
``cancel_running(reason)`` once and records its in-flight steps as cancelled; it neither
writes statuses nor touches leases itself. When ``cancel_running`` returns, every job the
runner started is stopped or will never again take a lease or write a status, each such
step's status is CANCELLED, and no lease taken by its jobs is left behind. A runner whose
jobs run in this process gets this from ``ActiveSteps``; one whose jobs run elsewhere stops
them and calls ``release_step`` for each (the Ray runner does).

A step with ``StepResources(hosts=N)`` is a gang (``marin.execution.gang``): the runner
starts N processes that run the step's function together, and runs the worker protocol
once for all of them, in its own process: ``execute_step(as_gang(job, gang), active)``,
where ``gang.run(fn, config)`` starts the members, each told its place (``GangMember``),
and raises ``GangError`` (one line naming the host) when one fails.

A runner that can run packs (``marin.execution.packs``, ``--pack N``) also has
``submit_pack(jobs, resources) -> list[Future[StepOutcome]]``: it runs
``execute_pack(jobs, active)`` in one place with one member's resources and sets each
member's future. The executor submits a runner without it one job at a time.
"""

from __future__ import annotations

from marin.execution.gang import GangError, GangMember, as_gang, free_port
from marin.execution.outcome import StepOutcome
from marin.execution.pack_worker import execute_pack
from marin.execution.runners.base import Runner, unimportable_module
from marin.execution.runners.local import LocalRunner
from marin.execution.states import StepState
from marin.execution.status import release_step
from marin.execution.step import StepResources
from marin.execution.worker import ActiveSteps, StepJob, execute_step

__all__ = ["ActiveSteps", "GangError", "GangMember", "LocalRunner", "Runner", "StepJob",
           "StepOutcome", "StepResources", "StepState", "as_gang", "execute_pack",
           "execute_step", "free_port", "make_runner", "release_step", "unimportable_module"]


def make_runner(backend: str, max_concurrent: int, **options: object) -> Runner:
    """The runner named ``backend``, built with ``options``: the runner options the user gave
    (``--runner-option KEY=VALUE``), which the runner class declares in ``options``."""
    from marin import registry

    try:
        cls = registry.load("runners", backend)
    except registry.PluginNotFoundError:
        if backend != "local":
            raise ValueError(f"unknown executor backend {backend!r}; installed backends: "
                             f"{', '.join(registry.names('runners')) or 'local'}") from None
        cls = LocalRunner
    except registry.PluginError as e:
        raise ValueError(f"executor backend {backend!r} is unusable: {e}") from e
    given = {k: v for k, v in options.items() if v is not None}
    declared = getattr(cls, "options", None)
    if declared is not None:
        unknown = sorted(set(given) - set(declared))
        if unknown:
            accepted = ", ".join(sorted(declared)) or "none"
            raise ValueError(f"--runner-option {unknown[0]}: the {backend!r} runner has no "
                             f"option {unknown[0]!r}; it accepts: {accepted}")
    return cls(max_concurrent=max_concurrent, **given)
