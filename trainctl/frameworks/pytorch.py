"""PyTorchJob: Master 1 + Worker N-1, torchrun-style env (MASTER_ADDR, RANK, PET_*)."""

from trainctl.frameworks._schema import BOOLEAN, INT32, METRICS, STRING, obj
from trainctl.frameworks.base import Framework


class PyTorch(Framework):
    kind = "PyTorchJob"
    name = "pytorch"
    aliases = ("torch", "pytorchjob")
    replica_spec_field = "pytorchReplicaSpecs"
    replica_types = ("Master", "Worker")
    container = "pytorch"
    port_name = "pytorchjob-port"
    port = 23456
    restart_policy = "OnFailure"
    scalable = True
    workers_help = "N nodes: Master 1 + Worker N-1"
    default_image = "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
    spec_properties = {
        "nprocPerNode": STRING,
        "elasticPolicy": obj(
            minReplicas=INT32,
            maxReplicas=INT32,
            maxRestarts=INT32,
            nProcPerNode=INT32,
            rdzvBackend=STRING,
            rdzvHost=STRING,
            rdzvId=STRING,
            rdzvPort=INT32,
            rdzvConf={"type": "array", "items": obj(key=STRING, value=STRING)},
            standalone=BOOLEAN,
            metrics=METRICS,
        ),
    }

    def topology(self, workers: int, **options: int) -> dict[str, int]:
        return {"Master": 1, "Worker": workers - 1} if workers > 1 else {"Master": 1}


FRAMEWORK = PyTorch()
