"""One training run over several processes: ``jax.distributed`` from what the runner passes.

    hosts = start_distributed()      # first, before anything starts JAX's backends
    hosts.index, hosts.count, hosts.primary          # Hosts(index=0, count=1) outside a gang

A step with ``StepResources(hosts=N)`` runs its function in N processes (a gang, see
``marin.execution.gang``), each told the coordinator's address, the host count and its rank
through the environment. ``start_distributed`` joins them: ``jax.distributed.initialize``
with those values, the coordination service's timeouts set below, and JAX's CPU collectives
on gloo (a CPU-only process has no collectives otherwise; accelerators use their own). Then
``jax.devices()`` lists every host's devices, and each process places only its own. The
global batch must split over hosts x devices per host (x the micro-batch):
``marin.training.config.check_batch_layout(batch_size, devices, microbatch_size, hosts)``.

Timeouts (the parameters of ``jax.distributed.initialize`` in jax 0.10.2):

* ``heartbeat_timeout_seconds=30`` (jax's default: 100). A process that sent no heartbeat
  for this long is declared dead, and every other process is told and aborts. 30 s keeps a
  dead or hung host's detection well within a minute, even counting the time the others
  need to notice the error, while leaving room for a slow host: the heartbeats come from a
  thread of the runtime, not from Python, so a long compile or a garbage collection does
  not stop them.
* ``shutdown_timeout_seconds=30`` (default 300): at exit a process waits this long for the
  others at the shutdown barrier, so a host that died near the end fails the rest in bounded
  time too.
* ``initialization_timeout=120`` (default 300): how long the members wait for each other
  to connect; a member that never starts (its host could not be scheduled) fails the gang
  within two minutes.

The gang's supervisor sees a member that dies (its process exit, or its Ray task's
failure) and stops the rest at once; the heartbeat is what bounds the cases it cannot see, a
host that hangs or loses its network.

JAX's persistent compilation cache is written by process 0 alone; on CPU each process's
programs have keys of their own, so the other processes compile at every start (on GPU the
keys are shared and every process reads what process 0 wrote).
"""

from __future__ import annotations

from dataclasses import dataclass

from marin.execution.gang import GangMember
from marin.training.config import TrainingConfigError

__all__ = ["HEARTBEAT_TIMEOUT", "ONE_HOST", "Hosts", "start_distributed"]

HEARTBEAT_TIMEOUT = 30
SHUTDOWN_TIMEOUT = 30
INITIALIZATION_TIMEOUT = 120


@dataclass(frozen=True)
class Hosts:
    """This process's place among the run's processes (``jax.process_index``/``count``)."""

    index: int = 0
    count: int = 1

    @property
    def primary(self) -> bool:
        """Whether this process writes the run's own files (metrics, trackers, summary)."""
        return self.index == 0


#: A run in one process.
ONE_HOST = Hosts()


def start_distributed() -> Hosts:
    """Join this process's gang (once; later calls return the same), or ``Hosts()`` alone."""
    import jax

    member = GangMember.from_environment()
    if member is None or member.hosts == 1:
        return ONE_HOST
    if not jax.distributed.is_initialized():
        from jax._src import xla_bridge

        if getattr(xla_bridge, "backends_are_initialized", lambda: False)():
            raise TrainingConfigError(
                f"this process is host {member.rank} of {member.hosts} but JAX already "
                "started its devices here, so it cannot join the others: start no JAX "
                "computation before train_lm in a multi-host step")
        # gloo: collectives between CPU processes (the CPU client has none by default)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(member.coordinator, num_processes=member.hosts,
                                   process_id=member.rank,
                                   initialization_timeout=INITIALIZATION_TIMEOUT,
                                   heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT,
                                   shutdown_timeout_seconds=SHUTDOWN_TIMEOUT)
    return Hosts(jax.process_index(), jax.process_count())
