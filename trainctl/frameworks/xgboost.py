"""XGBoostJob: Master 1 + Worker N-1; the master hosts the collective tracker."""

from trainctl.frameworks.base import PYTHONUNBUFFERED, Framework, TrainerRuntime, TrainerV2, env_var, peer_loss


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
    # the collective (rabit) losing a worker or its tracker mid-operation
    peer_loss_signatures = (
        peer_loss("XGBoost", r"XGBoostError.*(?:[Cc]onnection (?:closed|reset)|Socket (?:closed|error)|Broken pipe"
                             r"|Failed to (?:recv|send|receive))",
                  r"[Rr]abit.*(?:[Cc]onnection (?:closed|reset)|[Ss]ocket (?:closed|error)|Broken pipe)"),
    )

    leader_types = ("Master",)
    every_replica_runs_to_the_end = True
    trainer_v2 = TrainerV2("xgboost", "xgboost", "xgboost-distributed", node_types=("Master", "Worker"),
                           v1_env=("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "WORKER_ADDRS", "WORKER_PORT"),
                           v2_env=("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"))
    trainer_runtimes = (TrainerRuntime(trainer_v2.runtime, trainer_v2.label, "ghcr.io/kubeflow/trainer/xgboost-runtime"),)

    def topology(self, workers: int, **options: int) -> dict[str, int]:
        return {"Master": 1, "Worker": workers - 1} if workers > 1 else {"Master": 1}

    def admission_problems(self, spec):
        specs, path = self.replica_specs_at(spec)
        yield from self.one_replica(specs, path, "Master")
        if specs.get("Master") is None:
            yield f"{path}.Master", "must be present: XGBoost needs a Master replica to host the tracker"

    def env(self, job, rtype, index, network):
        world_size = job.total_replicas
        rank = index if rtype == "Master" else index + job.replicas("Master")
        env = [env_var("MASTER_PORT", network.port(job, "Master", 0)),
               env_var("MASTER_ADDR", network.host(job, "Master", 0)),
               env_var("WORLD_SIZE", world_size), env_var("RANK", rank), PYTHONUNBUFFERED]
        if world_size > 1:
            workers = ",".join(network.host(job, "Worker", i) for i in range(world_size - 1))
            env += [env_var("WORKER_PORT", network.port(job, "Worker", 0)), env_var("WORKER_ADDRS", workers)]
        return env


FRAMEWORK = XGBoost()
