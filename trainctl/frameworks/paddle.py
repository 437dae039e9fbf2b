"""PaddleJob: N Worker in collective mode; paddle.distributed.launch reads PADDLE_*."""

from trainctl.frameworks._schema import INT32, METRICS, obj
from trainctl.frameworks.base import Framework


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
    spec_properties = {
        "elasticPolicy": obj(minReplicas=INT32, maxReplicas=INT32, maxRestarts=INT32, metrics=METRICS),
    }


FRAMEWORK = Paddle()
