"""TFJob: N Worker (plus PS, Chief, Evaluator); TF_CONFIG on the tensorflow container."""

from trainctl.frameworks._schema import BOOLEAN, STRING
from trainctl.frameworks.base import Framework


class TensorFlow(Framework):
    kind = "TFJob"
    name = "tensorflow"
    aliases = ("tf", "tfjob")
    replica_spec_field = "tfReplicaSpecs"
    # evaluation order of the failure rule: Chief, Evaluator, Master, PS, Worker
    replica_types = ("Chief", "Evaluator", "Master", "PS", "Worker")
    container = "tensorflow"
    port_name = "tfjob-port"
    port = 2222
    restart_policy = "Never"
    workers_help = "N Worker (add --ps, --chief, --evaluator)"
    default_image = "docker.io/tensorflow/tensorflow:2.18.0"
    spec_properties = {"successPolicy": STRING, "enableDynamicWorker": BOOLEAN}

    def topology(self, workers: int, **options: int) -> dict[str, int]:
        counts = {"Chief": options.get("chief", 0), "Evaluator": options.get("evaluator", 0),
                  "PS": options.get("ps", 0), "Worker": workers}
        return {rtype: n for rtype, n in counts.items() if n > 0}


FRAMEWORK = TensorFlow()
