"""JAXJob: N Worker; jax.distributed reads COORDINATOR_ADDRESS/PORT, PROCESS_ID."""

from trainctl.frameworks.base import (PYTHONUNBUFFERED, Framework, FunctionLaunch, TrainerRuntime, TrainerV2, env_var,
                                      peer_loss)


class JAX(Framework):
    kind = "JAXJob"
    name = "jax"
    aliases = ("jaxjob",)
    replica_spec_field = "jaxReplicaSpecs"
    replica_types = ("Worker",)
    container = "jax"
    port_name = "jaxjob-port"
    port = 6666
    restart_policy = "Never"
    scalable = True
    workers_help = "N Worker"
    default_image = "docker.io/library/python:3.11-slim"
    # the coordination service (in process 0) noticing a process gone, or a process losing the service
    peer_loss_signatures = (
        peer_loss("JAX", r"JAX distributed service detected fatal errors",
                  r"has failed, got preempted, or crashed unexpectedly", r"missing heartbeats",
                  r"[Cc]oordination service.*(?:UNAVAILABLE|heartbeat)"),
    )

    # v1's kubeflow.org/v1 JAXJob env, or Trainer v2's jax plugin's (a TrainJob's function, api="v2")
    function_launch = FunctionLaunch(rank_variables=("PROCESS_ID", "JAX_PROCESS_ID"),
                                     world_variables=("NUM_PROCESSES", "JAX_NUM_PROCESSES"))
    trainer_v2 = TrainerV2("jax", "jax", "jax-distributed",
                           v1_env=("COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID"),
                           v2_env=("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"))
    trainer_runtimes = (TrainerRuntime(trainer_v2.runtime, trainer_v2.label, "nvcr.io/nvidia/jax:25.10-py3"),)

    def master_role(self, replica_types):
        return None

    def env(self, job, rtype, index, network):
        return [PYTHONUNBUFFERED,
                env_var("COORDINATOR_PORT", network.port(job, "Worker", 0)),
                env_var("COORDINATOR_ADDRESS", network.host(job, "Worker", 0)),
                env_var("NUM_PROCESSES", job.total_replicas),
                env_var("PROCESS_ID", index)]


FRAMEWORK = JAX()
