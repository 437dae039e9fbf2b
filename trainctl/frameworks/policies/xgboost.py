"""mlPolicy.xgboost: XGBoost's collective (Rabit) tracker variables (upstream
pkg/runtime/framework/plugins/xgboost/xgboost.go).

Rank 0's pod hosts the tracker (``<job>-node-0-0.<job>``, port 29500); each node's task id is its completion index;
the worker count is nodes x GPUs per node (1 per node on CPU). Upstream's plain-ML plugin also runs for an xgboost
runtime (it stands aside only for torch, mpi and jax) and upserts the trainer's env first; the result is the same.
"""

from __future__ import annotations

from trainctl.frameworks.policies.base import TRAINER_PORT, Info, Policy, gpus, index_env, upsert_env
from trainctl.frameworks.policies.base import upsert_port, value_env

TRACKER_URI, TRACKER_PORT, TASK_ID, NUM_WORKER = "DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"


class XGBoost(Policy):
    key = "xgboost"
    reserved_env = frozenset({TRACKER_URI, TRACKER_PORT, TASK_ID, NUM_WORKER})

    def enforce(self, info: Info) -> None:
        info.set_trainer_count()
        container = info.trainer_container()
        if container is None:
            return
        info.upsert_trainer_env()  # the plain-ML plugin's share
        workers = info.trainer_count() * (gpus(info.resources_per_node()) or 1)
        upsert_env(container.setdefault("env", []),
                   value_env(TRACKER_URI, info.addresses.rank0()),
                   value_env(TRACKER_PORT, info.addresses.rank0_port()),
                   index_env(TASK_ID),
                   value_env(NUM_WORKER, workers))
        upsert_port(container.setdefault("ports", []), TRAINER_PORT)


POLICY = XGBoost()
