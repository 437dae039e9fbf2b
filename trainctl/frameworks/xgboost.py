"""XGBoostJob: Master 1 + Worker N-1; the master hosts the collective tracker."""

from trainctl.frameworks.base import Framework


class XGBoost(Framework):
    kind = "XGBoostJob"
    name = "xgboost"
    aliases = ("xgb", "xgboostjob")
    replica_spec_field = "xgbReplicaSpecs"
    replica_types = ("Master", "Worker")
    container = "xgboost"
    port_name = "xgboostjob-port"
    port = 9999
    restart_policy = "Never"
    workers_help = "N nodes: Master 1 + Worker N-1"
    default_image = "docker.io/library/python:3.11-slim"

    def topology(self, workers: int, **options: int) -> dict[str, int]:
        return {"Master": 1, "Worker": workers - 1} if workers > 1 else {"Master": 1}


FRAMEWORK = XGBoost()
