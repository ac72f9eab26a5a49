"""Run each step as a Ray task.

    marin executor --backend ray --runner-option address=10.0.0.2:6379 experiments/x.py
    marin executor --backend ray --ray-address 10.0.0.2:6379 experiments/x.py   # the same
    Executor(prefix, backend="ray", runner_options={"address": "auto"})

A step's ``StepResources`` become the task's resources: ``num_cpus``, ``num_gpus``,
``memory``, and one unit of the custom resource ``TPU-<type>`` for ``tpu="v5e-8"`` (give
TPU hosts that resource when starting Ray). Inside the task the step runs through marin's
worker protocol (lease, status, heartbeat), so a Ray run and a local run on one prefix still
run each step once. Without an address, a local Ray instance is started on 127.0.0.1.
``runtime_env`` (a Ray runtime environment: environment variables, working dir, packages)
applies to every step task.

A step with ``StepResources(hosts=N)`` runs as a gang of N tasks in one placement group, one
bundle per host (``marin_ray.gang.RayGang``), supervised by a thread of this process, which
runs the worker protocol for the gang; a gang with more hosts than the cluster has nodes is
refused in one line when it is submitted.

A pack (``submit_pack``, ``--pack N``) is one task with one member's resources, which runs
``execute_pack`` there: each member's worker protocol and one training of them all.

The plugin uses only marin's runner API (``marin.execution.runners``). It owns cancellation:
``cancel_running`` cancels the Ray tasks and releases their steps (CANCELLED, no lease).
"""

from __future__ import annotations

import os
import socket
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any

import ray

from marin.execution.runners import (
    ActiveSteps,
    GangError,
    StepJob,
    StepOutcome,
    StepResources,
    as_gang,
    execute_pack,
    execute_step,
    release_step,
    unimportable_module,
)
from marin_ray.gang import RayGang
from marin_ray.resources import ray_options, refuse_gang

__all__ = ["RayConnectionError", "RayGang", "RayRunner", "ray_options"]


class RayConnectionError(ConnectionError):
    """The Ray cluster at the given address cannot be reached."""


# Passed on to every step task, so its logs reach the same log service as the executor's.
SERVICE_ENV = ("MARIN_LOGGER", "MARIN_RUN", "MARIN_CLUSTERS", "MARIN_STATE_DIR",
               "MARIN_SERVICES_TOKEN")


def _run_step(job: StepJob) -> StepOutcome:
    from marin.services.log_service.handler import install_from_env

    handler = install_from_env()
    try:
        return execute_step(job)
    finally:
        if handler is not None:
            handler.flush()  # the worker process lives on: deliver before reporting back


def _run_pack(jobs: list[StepJob]) -> list[StepOutcome | BaseException]:
    from marin.services.log_service.handler import install_from_env

    handler = install_from_env()
    try:
        return execute_pack(jobs)
    finally:
        if handler is not None:
            handler.flush()


def with_service_env(runtime_env: dict[str, Any] | None) -> dict[str, Any] | None:
    """``runtime_env`` plus the service settings of this process's environment."""
    env = {k: os.environ[k] for k in SERVICE_ENV if os.environ.get(k)}
    if not env:
        return runtime_env
    merged = dict(runtime_env or {})
    merged["env_vars"] = {**env, **merged.get("env_vars", {})}
    return merged


class RayRunner:
    name = "ray"
    options = {
        "address": "the Ray cluster to join: HOST:PORT of the head node, or auto "
                   "(default: start a local Ray instance)",
        "runtime_env": "a Ray runtime environment for every step task (programmatic use)",
    }

    def __init__(self, max_concurrent: int = 1, address: str | None = None,
                 runtime_env: dict[str, Any] | None = None):
        self.max_concurrent = max(1, max_concurrent)
        self._address = address
        self._lock = threading.Lock()
        # each entry: a step, or a pack's members, with one future each
        self._queue: deque[tuple[list[StepJob], StepResources, list[Future[StepOutcome]]]] = \
            deque()
        self._running: dict[Any, tuple[list[StepJob], list[Future[StepOutcome]]]] = {}
        self._gangs: dict[str, RayGang] = {}  # step key -> its gang, running
        self._active = ActiveSteps()  # the gangs' worker protocol runs in this process
        self._started_ray = False
        self._connect()
        self._remote = ray.remote(_run_step)
        self._remote_pack = ray.remote(_run_pack)
        self._runtime_env = with_service_env(runtime_env)

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        if self._address and self._address != "auto":
            _check_reachable(self._address)
            ray.init(address=self._address, log_to_driver=True)
        elif self._address == "auto":
            ray.init(address="auto")
        else:
            # address="local" always starts a new instance: without it Ray joins whatever
            # cluster its address file (/tmp/ray/ray_current_cluster) names, which may be
            # left over from a crashed session. The instance listens on loopback only, so
            # it needs no token (Ray would otherwise write one under the home folder).
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1",
                     num_cpus=max(self.max_concurrent, 1))
        self._started_ray = True

    def submit(self, job: StepJob, resources: StepResources) -> Future[StepOutcome]:
        _pickle_experiment_by_value(job)
        future: Future[StepOutcome] = Future()
        refusal = refuse_gang(job.name, resources) if resources.hosts > 1 else None
        if refusal is not None:
            future.set_exception(GangError(refusal))
            return future
        with self._lock:
            self._queue.append(([job], resources, [future]))
        self._dispatch()
        return future

    def submit_pack(self, jobs: list[StepJob], resources: StepResources
                    ) -> list[Future[StepOutcome]]:
        """Run ``jobs`` (one pack key, one host each) as one task with ``resources``."""
        for job in jobs:
            _pickle_experiment_by_value(job)
        futures: list[Future[StepOutcome]] = [Future() for _ in jobs]
        with self._lock:
            self._queue.append((list(jobs), resources, futures))
        self._dispatch()
        return futures

    def cancel_running(self, reason: str) -> list[str]:
        with self._lock:
            running = list(self._running.items())
            gangs = list(self._gangs.values())
            for _, _, futures in self._queue:
                for future in futures:
                    future.cancel()
            self._queue.clear()
        for ref, _ in running:
            ray.cancel(ref, force=True)
        jobs = [job for _, (members, _) in running for job in members]
        for job in jobs:  # a killed task cannot release its own lease
            release_step(job.output_path, job.run_id, reason)
        cancelled = self._active.cancel_all(reason)  # the gangs' leases, held here
        for gang in gangs:
            gang.stop(reason)
        return [job.key for job in jobs] + cancelled

    def shutdown(self) -> None:
        if self._started_ray and not self._address:
            ray.shutdown()
            self._started_ray = False

    def _dispatch(self) -> None:
        with self._lock:
            while self._queue and len(self._running) + len(self._gangs) < self.max_concurrent:
                jobs, resources, futures = self._queue.popleft()
                if not all([f.set_running_or_notify_cancel() for f in futures]):
                    continue
                job, future = jobs[0], futures[0]
                if resources.hosts > 1:
                    gang = self._gangs[job.key] = RayGang(resources, self._runtime_env)
                    threading.Thread(target=self._run_gang, args=(job, gang, future),
                                     daemon=True, name=f"marin-gang-{job.name}").start()
                    continue
                options = ray_options(resources)
                if self._runtime_env:
                    options["runtime_env"] = self._runtime_env
                ref = self._remote.options(**options).remote(job) if len(jobs) == 1 else \
                    self._remote_pack.options(**options).remote(jobs)
                self._running[ref] = (jobs, futures)
                ref.future().add_done_callback(lambda f, ref=ref: self._finished(ref, f))

    def _run_gang(self, job: StepJob, gang: RayGang, future: Future[StepOutcome]) -> None:
        try:
            outcome = execute_step(as_gang(job, gang), self._active)
        except BaseException as e:  # storage errors etc.: surface through the future
            outcome, error = None, e
        with self._lock:
            self._gangs.pop(job.key, None)
        if outcome is None:
            future.set_exception(error)
        else:
            future.set_result(outcome)
        self._dispatch()

    def _finished(self, ref: Any, done: Future) -> None:
        with self._lock:
            _, futures = self._running.pop(ref, (None, []))
        error = done.exception() if futures else None
        if error is not None:
            results = [error] * len(futures)
        else:  # a step's outcome, or a pack's list of them
            results = [done.result()] if len(futures) == 1 else done.result() if futures else []
        for future, result in zip(futures, results, strict=True):
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
        self._dispatch()


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            return
    except (OSError, ValueError) as e:
        raise RayConnectionError(
            f"cannot reach the Ray cluster at {address!r} ({e}); check the address "
            "(HOST:PORT of the head node's GCS, 6379 by default) or leave --ray-address "
            "out to start a local Ray instance") from None


def _pickle_experiment_by_value(job: StepJob) -> None:
    """Experiment files are loaded under a private module name that Ray workers cannot
    import; ship their code by value instead."""
    from ray import cloudpickle

    module = unimportable_module(job.fn)
    if module is not None:
        cloudpickle.register_pickle_by_value(module)
