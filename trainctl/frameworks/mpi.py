"""MPIJob: Launcher 1 + Worker N; the launcher runs mpirun over a hostfile of workers.

Workers only host ranks that the launcher starts (in a cluster through kubectl exec),
so they run ``sleep 365d`` unless their template gives a command.
"""

from trainctl.frameworks._schema import INT32, STRING
from trainctl.frameworks.base import Framework, env_var

WORKER_IDLE_COMMAND = {"command": ["sleep"], "args": ["365d"]}


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

    def master_role(self, replica_types):
        return "Launcher"

    def status_role(self, replica_types):
        return "Launcher"

    def wired_containers(self, job, rtype, containers):
        return containers[:1]

    def slots(self, job) -> int:
        return job.spec.get("slotsPerWorker") or 1

    def gpu_launcher(self, job) -> bool:
        containers = job.template("Launcher")["spec"].get("containers", [])
        limits = [key for c in containers for key in ((c.get("resources") or {}).get("limits") or {})]
        return any(key.endswith(".com/gpu") or "gpu" in key for key in limits)

    def env(self, job, rtype, index, network):
        if rtype != "Launcher":
            return []
        hostfile = f"{network.mpi_config_dir}/hostfile" if not network.cluster else "/etc/mpi/hostfile"
        if not network.cluster:
            # one host: no kubectl-exec agent; Open MPI 5 (prterun) reads the PRTE twin of the hostfile setting
            return [env_var("OMPI_MCA_orte_default_hostfile", hostfile),
                    env_var("PRTE_MCA_prte_default_hostfile", hostfile)]
        env = [env_var("OMPI_MCA_plm_rsh_agent", "/etc/mpi/kubexec.sh"),
               env_var("OMPI_MCA_orte_default_hostfile", hostfile)]
        if not self.gpu_launcher(job):
            env += [env_var("NVIDIA_VISIBLE_DEVICES", ""), env_var("NVIDIA_DRIVER_CAPABILITIES", "")]
        return env + [env_var("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
                      env_var("I_MPI_HYDRA_BOOTSTRAP_EXEC", "/etc/mpi/kubexec.sh")]

    def hostfile(self, job, network) -> str:
        """The launcher's hostfile: one line per worker pod, or every slot on 127.0.0.1 locally."""
        slots, workers = self.slots(job), job.replicas("Worker")
        if not network.cluster:
            return f"{network.host(job, 'Worker', 0)} slots={max(workers, 1) * slots}\n"
        lines = [f"{job.pod_name('Launcher', 0)} slots={slots}\n"] if self.gpu_launcher(job) else []
        return "".join(lines + [f"{job.pod_name('Worker', i)} slots={slots}\n" for i in range(workers)])


FRAMEWORK = MPI()
