"""XGBoost collective training from the XGBoostJob env (MASTER_ADDR/PORT, RANK, WORLD_SIZE).

Rank 0 (the Master) hosts the tracker on MASTER_ADDR:MASTER_PORT, as Kubeflow's
xgboost example does; every rank trains on its own shard and the histograms are
all-reduced, so every rank ends with the same booster.

    trainctl submit xgboost --workers 2 -- python examples/xgboost/train_collective.py
"""

import hashlib
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np
import xgboost
from xgboost import collective
from xgboost.tracker import RabitTracker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from result import report  # noqa: E402


def wait_until_resolvable(host: str, timeout_s: float = 120) -> None:
    """The Master's name is a headless Service, which DNS answers only once the Master's pod is
    ready: on a cluster a Worker may well start first, and XGBoost does not retry a failed lookup."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.getaddrinfo(host, None)
            return
        except socket.gaierror:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def main() -> None:
    rank, world_size = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    host, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", 9091))
    wait_until_resolvable(host)
    tracker = None
    if rank == 0:
        # sortby="task" makes collective ranks follow RANK instead of the host order
        tracker = RabitTracker(n_workers=world_size, host_ip=host, port=port, sortby="task", timeout=120)
        tracker.start()
    with collective.CommunicatorContext(dmlc_tracker_uri=host, dmlc_tracker_port=port, dmlc_task_id=str(rank),
                                        dmlc_retry=20, dmlc_timeout=120):
        total = collective.allreduce(np.array([rank + 1.0]), collective.Op.SUM)[0]
        rng = np.random.default_rng(rank)
        features = rng.normal(size=(500, 6))
        labels = (features[:, 0] + features[:, 1] > 0).astype(int)
        booster = xgboost.train({"tree_method": "hist", "objective": "binary:logistic", "max_depth": 3},
                                xgboost.DMatrix(features, label=labels), num_boost_round=4)
        model_hash = hashlib.sha256(bytes(booster.save_raw("ubj"))).hexdigest()
        report("xgboost", collective.get_rank(), collective.get_world_size(), total, model_hash)
    if tracker is not None:
        tracker.wait_for()


if __name__ == "__main__":
    main()
