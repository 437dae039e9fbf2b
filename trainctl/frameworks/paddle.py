"""PaddleJob: N Worker in collective mode; paddle.distributed.launch reads PADDLE_*."""

from trainctl.frameworks._schema import INT32, METRICS, obj
import os

from trainctl.frameworks.base import PYTHONUNBUFFERED, Framework, FunctionLaunch, TrainerV2, env_var, peer_loss

LAUNCHER = ("-m", "paddle.distributed.launch")  # makes the collective ranks of a function job's replica


class Paddle(Framework):
    kind = "PaddleJob"
    name = "paddle"
    aliases = ("paddlepaddle", "paddlejob")
    replica_spec_field = "paddleReplicaSpecs"
    replica_types = ("Master", "Worker")
    container = "paddle"
    port_name = "master"
    port = 36543
    restart_policy = "OnFailure"
    scalable = True
    workers_help = "N Worker (collective mode)"
    default_image = "docker.io/paddlepaddle/paddle:3.0.0"
    # Paddle's collectives (gloo on CPU, NCCL on GPU) reporting a peer gone; gloo's own lines match
    # the PyTorch module's gloo signature too
    peer_loss_signatures = (
        peer_loss("Paddle", r"(?:ExternalError|PreconditionNotMetError|UnavailableError).*(?:[Cc]onnection"
                            r" (?:closed|reset) by peer|remote process exited|Socket closed|Broken pipe)"),
    )
    spec_properties = {
        "elasticPolicy": obj(minReplicas=INT32, maxReplicas=INT32, maxRestarts=INT32, metrics=METRICS),
    }
    leader_types = ("Master",)
    function_launch = FunctionLaunch(rank_variables=("PADDLE_TRAINER_ID",),
                                     world_variables=("PADDLE_TRAINERS_NUM",))
    # no runtime ships: a plain one (collective mode; the parameter-server mode's Master has no v2 role)
    trainer_v2 = TrainerV2(None, "paddle", v1_env=("PADDLE_MASTER", "PADDLE_NNODES", "PADDLE_JOB_ID"))

    def function_command(self, python, runner, options):
        return [python, *LAUNCHER, runner]

    def lockstep(self, replica_types):
        return "Master" not in replica_types  # the parameter-server mode's workers do not wait for one another

    def local_env(self, job, rtype, index, state_dir):
        # a log directory of its own: paddle's launcher writes workerlog.N files into ./log otherwise
        env = {"PADDLE_LOG_DIR": os.path.join(state_dir, "paddle", job.pod_name(rtype, index))}
        if "Master" not in job.replica_types:
            # its rank in the collective, as a cluster gives it: there only worker-0's launcher is on PADDLE_MASTER's
            # IP, serves the rendezvous and is rank 0; on 127.0.0.1 every launcher may, and the first one is rank 0
            env["PADDLE_RANK"] = str(index)
        return env

    def env(self, job, rtype, index, network):
        coordinator = self.status_role(job.replica_types)  # Master in PS mode, else Worker (collective)
        port = network.port(job, coordinator, 0)
        env = [PYTHONUNBUFFERED, env_var("PADDLE_JOB_ID", job.name), env_var("PADDLE_NNODES", job.total_replicas)]
        if rtype == coordinator and index == 0:
            env += [{"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    env_var("PADDLE_MASTER", f"$(POD_IP_DUMMY):{port}")]
        else:
            env.append(env_var("PADDLE_MASTER", f"{network.host(job, coordinator, 0)}:{port}"))
        if "Master" in job.replica_types:
            env.append(env_var("PADDLE_SERVER_NUM" if rtype == "Master" else "PADDLE_TRAINER_NUM", 1))
        return env


FRAMEWORK = Paddle()
