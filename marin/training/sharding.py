"""How a training run places its state and batches on the devices of every host.

    sharding = Sharding(batch_size=16)             # every device of every host
    state = sharding.place_state(state)            # FSDP: parameters split along ``embed``
    tokens = sharding.place_batch(batch)           # this host's rows of a global batch
"""

from __future__ import annotations

from typing import Any

import haliax as hax
import jax
import jax.numpy as jnp
import numpy as np

from marin.training.distributed import ONE_HOST, Hosts

__all__ = ["Sharding"]


class Sharding:
    """Data parallelism plus FSDP over every device of every host.

    One mesh axis, ``data``, spans every device: batches are split along their batch axis,
    and every parameter (and its optimizer state) with an ``embed`` axis is split along it
    (the haliax axis mapping ``{"embed": "data"}``), so each device holds 1/n of the model.
    XLA inserts the all-gathers and reduce-scatters. On one device nothing is placed. With
    several hosts each passes only its slice of a batch (``place_batch``): the global array
    is made of every host's part (``jax.make_array_from_process_local_data``).
    """

    PARAMETER_MAPPING = {"embed": "data"}

    def __init__(self, batch_size: int, hosts: Hosts = ONE_HOST):
        devices = jax.devices()
        self.count = len(devices)
        self.hosts = hosts
        self.batch_size = batch_size
        self.mesh = jax.sharding.Mesh(np.array(devices), ("data",))
        self.batch = jax.sharding.NamedSharding(self.mesh,
                                                jax.sharding.PartitionSpec("data", None))

    def place_state(self, state: Any) -> Any:
        if self.count == 1:
            return state
        with hax.partitioning.set_mesh(self.mesh):
            state = hax.shard(state, self.PARAMETER_MAPPING)
        # What the mapping leaves on one device (step counts, the hyperparameters) is
        # copied to every device: the update's outputs are, and an input placed otherwise
        # would compile the update a second time at the next step.
        everywhere = jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())
        return jax.tree.map(lambda x: x if not isinstance(x, jax.Array) or isinstance(
            x.sharding, jax.sharding.NamedSharding) else jax.device_put(x, everywhere), state)

    def place_batch(self, batch: np.ndarray) -> jax.Array:
        """This host's rows of a global batch (all of it on one host), on the devices."""
        if self.count == 1:
            return jnp.asarray(batch)
        if self.hosts.count == 1:
            return jax.device_put(batch, self.batch)
        return jax.make_array_from_process_local_data(
            self.batch, batch, (self.batch_size, *batch.shape[1:]))

    def place_eval(self, batch: np.ndarray) -> jax.Array:
        """A whole evaluation batch, which every host holds: split over the devices when it
        divides evenly, else a copy on each (the last batch of a small set)."""
        if self.hosts.count == 1:
            return jnp.asarray(batch)
        spec = ("data", None) if len(batch) % self.count == 0 else ()
        sharding = jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec(*spec))
        return jax.make_array_from_callback(batch.shape, sharding, lambda index: batch[index])
