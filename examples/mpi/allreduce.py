"""mpi4py allreduce, plus a tiny data-parallel regression whose averaged gradients keep every rank's model equal.

    trainctl submit mpi --workers 2 -- python examples/mpi/allreduce.py
"""

import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from result import parameter_hash, report  # noqa: E402


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, world_size = comm.Get_rank(), comm.Get_size()
    total = comm.allreduce(float(rank + 1), op=MPI.SUM)

    rng = np.random.default_rng(rank)  # each rank its own data shard
    features = rng.normal(size=(256, 8))
    target = features @ np.arange(1.0, 9.0)
    weights = np.zeros(8)
    for _ in range(50):
        gradient = features.T @ (features @ weights - target) / len(target)
        averaged = np.empty_like(gradient)
        comm.Allreduce(gradient, averaged, op=MPI.SUM)
        weights -= 0.1 * averaged / world_size
    report("mpi", rank, world_size, total, parameter_hash([weights]))


if __name__ == "__main__":
    main()
