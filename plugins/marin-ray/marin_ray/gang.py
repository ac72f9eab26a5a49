"""A multi-host step on Ray: its hosts as one gang of tasks in one placement group.

    gang = RayGang(StepResources(hosts=2, placement="strict_spread"), runtime_env)
    execute_step(as_gang(job, gang))      # in a thread of the executor's process
    gang.stop("interrupted")              # the runner's cancellation

The placement group holds one bundle per host (``marin_ray.resources.bundle``) with the
step's ``placement`` as its strategy (``STRICT_SPREAD``: one host per node). Once it is
placed, a small task on the first bundle's node picks the coordinator's address there, and
one task per host starts on its bundle, with the gang's environment
(``marin.execution.gang.GangMember``) in its runtime environment: each host thus gets a
fresh worker process of its own (JAX starts once per process), which exits afterwards.

The worker protocol runs in the executor's process (``execute_step``, which calls
``run``); no task holds the lease. The first task to fail makes the gang cancel the others
and raise ``GangError`` naming the host and its node; the lease is released by the protocol.
A host whose node dies fails its task once Ray declares the node dead; one that hangs is
bounded by the ``jax.distributed`` heartbeat of the others (``marin.training.distributed``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from marin.execution.runners import GangError, GangMember, StepResources, free_port
from marin_ray.resources import bundle, ray_options

__all__ = ["RayGang"]


class RayGang:
    """The hosts of one step as Ray tasks of one placement group (see the module).

    Args:
        resources: the step's resources: ``hosts``, ``placement`` and each host's share.
        runtime_env: the runner's runtime environment, for every task of the gang.
    """

    POLL = 0.5  # seconds between looks at a stop request while waiting
    COMPANIONS = 1.0  # once a host failed, seconds to let its peers' failures arrive

    def __init__(self, resources: StepResources, runtime_env: dict[str, Any] | None = None):
        self.hosts = resources.hosts
        self.resources = resources
        self.runtime_env = runtime_env or {}
        self._tasks: list[Any] = []
        self._stopped: str | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[Any], Any], config: Any) -> None:
        group = placement_group([bundle(self.resources)] * self.hosts,
                                strategy=self.resources.placement.upper())
        try:
            self._wait(group.ready())
            nodes = _nodes_of(group)
            first = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0)
            address = self._wait(_pick_coordinator.options(
                num_cpus=0, scheduling_strategy=first, runtime_env=self.runtime_env or None,
                max_retries=0).remote())
            options = ray_options(self.resources)
            with self._lock:
                if self._stopped is not None:
                    raise GangError(f"the gang was stopped: {self._stopped}")
                for rank in range(self.hosts):
                    env = {**self.runtime_env.get("env_vars", {}),
                           **GangMember(address, self.hosts, rank).environment()}
                    self._tasks.append(_run_host.options(
                        **options, runtime_env={**self.runtime_env,
                                                             "env_vars": env},
                        scheduling_strategy=PlacementGroupSchedulingStrategy(
                            group, placement_group_bundle_index=rank)).remote(fn, config))
            self._supervise(nodes)
        finally:
            self._cancel()
            remove_placement_group(group)

    def stop(self, reason: str) -> None:
        """Cancel every task of the gang (the runner's cancellation); ``run`` then raises."""
        with self._lock:
            self._stopped = reason
        self._cancel()

    def _wait(self, ref: Any) -> Any:
        while True:
            done, _ = ray.wait([ref], timeout=self.POLL)
            if done:
                return ray.get(ref)
            if self._stopped is not None:
                raise GangError(f"the gang was stopped: {self._stopped}")

    def _supervise(self, nodes: list[str]) -> None:
        running = {ref: rank for rank, ref in enumerate(self._tasks)}
        while running:
            done, _ = ray.wait(list(running), num_returns=1, timeout=self.POLL)
            if self._stopped is not None:
                raise GangError(f"the gang was stopped: {self._stopped}")
            failed = []
            for ref in done:
                rank, error = running.pop(ref), _failure(ref)
                if error is not None:
                    failed.append((rank, error))
            if not failed:
                continue
            time.sleep(self.COMPANIONS)  # the failed host's peers fail at once: name the cause
            ready, _ = ray.wait(list(running), num_returns=len(running), timeout=0)
            failed += [(running[ref], error) for ref in ready
                       if (error := _failure(ref)) is not None]
            # a host whose process or node died, before one whose step raised (a peer's)
            rank, error = min(failed, key=lambda f: (
                isinstance(f[1], ray.exceptions.RayTaskError), f[0]))
            raise GangError(f"host {rank} of {self.hosts} (node {nodes[rank]}) failed: "
                            f"{_describe(error)}; the gang's other hosts were stopped")

    def _cancel(self) -> None:
        """Cancel the tasks still running. Never a finished one: Ray 2.60's driver can abort
        (``Tried to complete task that was not pending``) when a task it is told to cancel
        completes at that moment, and a finished task has nothing left to stop."""
        with self._lock:
            tasks = list(self._tasks)
        if not tasks:
            return
        _, running = ray.wait(tasks, num_returns=len(tasks), timeout=0)
        for ref in running:
            ray.cancel(ref, force=True)


@ray.remote
def _pick_coordinator() -> str:
    """``ip:port`` on this node for the gang's coordinator (rank 0 starts it there)."""
    ip = ray.util.get_node_ip_address()
    return f"{ip}:{free_port(ip)}"


@ray.remote(max_calls=1)  # a host's worker exits with it: JAX starts once per process
def _run_host(fn: Callable[[Any], Any], config: Any) -> None:
    from marin.services.log_service.handler import install_from_env

    handler = install_from_env()
    try:
        fn(config)
    finally:
        if handler is not None:
            handler.flush()


def _failure(ref: Any) -> BaseException | None:
    try:
        ray.get(ref, timeout=0)
    except ray.exceptions.GetTimeoutError:
        return None
    except Exception as e:  # the task's error, or Ray's (its worker or node died)
        return e
    return None


def _describe(error: BaseException) -> str:
    """The task's own exception (else Ray's), as one line with its type."""
    if isinstance(error, ray.exceptions.RayTaskError) and error.cause is not None:
        error = error.cause
    text = " ".join(str(error).split()).rstrip(".")
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _nodes_of(group: Any) -> list[str]:
    """Each bundle's node, as ``ip (node id prefix)``."""
    table = ray.util.placement_group_table(group)
    addresses = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
    placed = table.get("bundles_to_node_id", {})
    return [f"{addresses.get(placed.get(i), '?')}, {str(placed.get(i, '?'))[:8]}"
            for i in range(len(table.get("bundles", {})) or len(placed))]
