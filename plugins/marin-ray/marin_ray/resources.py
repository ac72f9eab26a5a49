"""A step's ``StepResources`` in Ray's terms: a task's options, a gang's bundles, and the
refusal of a gang the cluster cannot hold.

    ray_options(StepResources(cpus=4, gpus=1))   # {"num_cpus": 4, "num_gpus": 1, ...}
    bundle(StepResources(cpus=4, hosts=2))       # {"CPU": 4}: one per host of the gang
    refuse_gang(job.name, resources)             # None, or one line naming the field
"""

from __future__ import annotations

from typing import Any

import ray

from marin.execution import StepResources

__all__ = ["bundle", "ray_options", "refuse_gang"]


def ray_options(resources: StepResources) -> dict[str, Any]:
    """The options of the task that runs one host of the step."""
    options: dict[str, Any] = {"num_cpus": resources.cpus, "num_gpus": resources.gpus,
                               "max_retries": 0}
    if resources.memory_gb:
        options["memory"] = int(resources.memory_gb * 2**30)
    if resources.tpu:
        options["resources"] = {f"TPU-{resources.tpu}": 1}
    return options


def bundle(resources: StepResources) -> dict[str, float]:
    """One host's bundle of a gang's placement group: what ``ray_options`` asks for."""
    options = ray_options(resources)
    found = {"CPU": options["num_cpus"], "GPU": options["num_gpus"],
             "memory": options.get("memory", 0), **options.get("resources", {})}
    return {name: amount for name, amount in found.items() if amount}


def refuse_gang(name: str, resources: StepResources) -> str | None:
    """Why the connected cluster cannot run step ``name``'s gang (more hosts than nodes), in
    one line; None when it can. Only a cluster knows its nodes: this is checked when the
    gang is submitted, not when it is planned."""
    nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
    if resources.hosts <= nodes:
        return None
    return (f"step {name!r} asks for StepResources.hosts={resources.hosts} but the Ray "
            f"cluster has {nodes} node(s): lower hosts to at most {nodes}, or add nodes")
