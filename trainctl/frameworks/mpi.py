"""MPIJob: Launcher 1 + Worker N; the launcher runs mpirun over a hostfile of workers."""

from trainctl.frameworks._schema import INT32, STRING
from trainctl.frameworks.base import Framework


class MPI(Framework):
    kind = "MPIJob"
    name = "mpi"
    aliases = ("mpijob",)
    replica_spec_field = "mpiReplicaSpecs"
    replica_types = ("Launcher", "Worker")
    # upstream declares "mpi" but wires containers[0]; we do the same
    container = "mpi"
    port_name = None
    port = None
    restart_policy = "Never"
    default_replicas = {"Launcher": 1, "Worker": 0}
    workers_help = "Launcher 1 + Worker N"
    default_image = "docker.io/mpioperator/openmpi:0.6.0"
    spec_properties = {
        "slotsPerWorker": INT32,
        "mainContainer": STRING,
        # deprecated top-level twin of runPolicy.cleanPodPolicy (runPolicy wins)
        "cleanPodPolicy": STRING,
    }

    def topology(self, workers: int, **options: int) -> dict[str, int]:
        return {"Launcher": 1, "Worker": workers}


FRAMEWORK = MPI()
