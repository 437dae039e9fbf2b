"""jax.distributed from the JAXJob env (COORDINATOR_ADDRESS/PORT, NUM_PROCESSES, PROCESS_ID).

Each process fits a linear model on its own shard; gradients are averaged across
processes with a real collective each step, so every process ends with the same model.

    trainctl submit jax --workers 2 -- python examples/jax/train_distributed.py
"""

import os
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from result import parameter_hash, report  # noqa: E402


def main() -> None:
    processes = int(os.environ.get("NUM_PROCESSES", "1"))
    if processes > 1:
        jax.distributed.initialize(
            coordinator_address=f"{os.environ['COORDINATOR_ADDRESS']}:{os.environ['COORDINATOR_PORT']}",
            num_processes=processes, process_id=int(os.environ["PROCESS_ID"]))
    rank, world_size = jax.process_index(), jax.process_count()
    total = multihost_utils.process_allgather(jnp.array([rank + 1.0])).sum()

    rng = np.random.default_rng(rank)
    features = jnp.asarray(rng.normal(size=(256, 8)))
    target = features @ jnp.arange(1.0, 9.0)
    weights = jnp.zeros(8)
    loss_gradient = jax.jit(jax.grad(lambda w: jnp.mean((features @ w - target) ** 2)))
    for _ in range(30):
        gradients = multihost_utils.process_allgather(loss_gradient(weights))
        weights = weights - 0.05 * gradients.reshape(world_size, -1).mean(axis=0)
    report("jax", rank, world_size, float(total), parameter_hash([np.asarray(weights)]))


if __name__ == "__main__":
    main()
