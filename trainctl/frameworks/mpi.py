"""MPIJob: Launcher 1 + Worker N; the launcher runs mpirun over a hostfile of workers.

Workers only host ranks that the launcher starts (in a cluster through kubectl exec),
so they run ``sleep 365d`` unless their template gives a command.
"""

import os
import re
from pathlib import Path

from trainctl.frameworks._schema import BOOLEAN, INT32, STRING, obj
from trainctl.frameworks.base import (LABEL_REPLICA_TYPE, NODE, Framework, FunctionLaunch, HelperImage, KindOption,
                                      TrainerRuntime, TrainerV2, env_var, peer_loss, trainer_job)

WORKER_IDLE_COMMAND = {"command": ["sleep"], "args": ["365d"]}
LAUNCHERS = ("mpirun", "mpiexec", "horovodrun", "prterun")
HOSTFILE = "mpi/hostfile"  # a local job's, under its directory
CONFIG_DIR, KUBECTL_DIR = "/etc/mpi", "/opt/kube"
CONFIG_VOLUME, KUBECTL_VOLUME = "mpi-job-config", "mpi-job-kubectl"
EXECUTABLE, READ_ONLY = 0o555, 0o444
# upstream's --mpi-kubectl-delivery-image, and its default
KUBECTL_DELIVERY_IMAGE = HelperImage("mpi_kubectl_delivery_image", "--mpi-kubectl-delivery-image",
                                     "kubeflow/kubectl-delivery:latest", (
    "Image of the MPI launcher's init container: copies kubectl to $TARGET_DIR for kubexec.sh, then waits "
    "until every worker accepts kubectl exec. Default: kubeflow/kubectl-delivery:latest."))
# Open MPI 4 options whose single-dash spelling Open MPI 5 (prterun) takes for the executable ("Executable: none")
OPEN_MPI_5_DOUBLE_DASH = ("-bind-to", "-map-by", "-rank-by")
OPEN_MPI_VERSION = r"\(Open MPI\) (\d+)\.[\d.]+"  # compiled on first use: only an MPI launch asks
# Trainer v2's default MPI runtimes (DeepSpeed, MLX): their images run sshd as this user on this port, from its home
RUNTIME_USER, RUNTIME_HOME, RUNTIME_SSHD_PORT = 1000, "/home/mpiuser", 2222
# Trainer v2's mpi policy at its CRD defaults
POLICY_DEFAULTS = {"numProcPerNode": 1, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/root/.ssh",
                   "runLauncherAsNode": False}


# ---- locally, where every rank runs on this machine (an MPIJob's, and a TrainJob's on an MPI runtime) ----------
def local_hostfile_env(hostfile: str) -> list[dict]:
    """The launcher's hostfile setting on one host: no kubectl-exec or ssh agent, since every slot is this machine's;
    Open MPI 5 (prterun) reads only the PRTE twin of the setting."""
    return [env_var("OMPI_MCA_orte_default_hostfile", hostfile), env_var("PRTE_MCA_prte_default_hostfile", hostfile)]


# Ranks of several nodes share this machine's cores: bound to cores, more ranks than cores are refused ("binding
# processes to more cpus than are available"); Open MPI 4's and 5's spelling of --bind-to none
LOCAL_UNBOUND = {"OMPI_MCA_hwloc_base_binding_policy": "none", "PRTE_MCA_hwloc_default_binding_policy": "none"}


def run_as_root_env() -> dict[str, str]:
    """Open MPI refuses to run as root unless told twice (a container's user is root)."""
    return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"} if os.geteuid() == 0 else {}


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
    # Open MPI's launcher (mpirun, prterun in Open MPI 5) stopping the job because a rank ended; a rank's
    # own traceback, when it raised, comes before and is the cause
    peer_loss_signatures = (
        peer_loss("MPI", r"(?:mpirun|prterun) noticed that process rank \d+", r"MPI_ABORT was invoked on rank \d+",
                  r"(?:mpirun|prterun) has exited due to process rank \d+",
                  r"(?:mpirun|prterun) detected that one or more processes exited with non-zero status",
                  r"(?:ORTE|PRTE) has lost communication with a remote daemon"),
    )
    spec_properties = {
        "slotsPerWorker": INT32,
        "mainContainer": STRING,
        # deprecated top-level twin of runPolicy.cleanPodPolicy (runPolicy wins)
        "cleanPodPolicy": STRING,
    }
    leader_types = unindexed_types = ("Launcher",)
    wires_first_container = True
    services = False  # the launcher reaches its workers through kubectl exec, by pod name
    options = (KindOption("slots_per_worker", int, "MPI slots (ranks) per worker.", minimum=1),)
    launchers = LAUNCHERS
    no_packages = "whose ranks on the workers start over ssh, outside any wrapper"
    # mpirun's world rank (Open MPI, PMIx, MPICH): its ranks' output is the launcher's, so only rank 0 reports;
    # a rank that raises aborts the others, which would wait for it in their next collective
    function_launch = FunctionLaunch(rank_variables=("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"),
                                     world_variables=("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"),
                                     replica_ranks=("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"),
                                     shared_rank=("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
                                     abort_module="mpi4py.MPI")
    helper_images = (KUBECTL_DELIVERY_IMAGE,)
    # v2's mpi plugin starts the ranks over ssh (the nodes' image runs sshd), not through kubectl exec; no
    # runtime of this shape ships (deepspeed's and mlx's run the launcher as a node, with their own images)
    trainer_v2 = TrainerV2("mpi", "mpi", launcher_type="Launcher", proc_field="slotsPerWorker",
                           policy_defaults=tuple(POLICY_DEFAULTS.items()),
                           v1_env=("OMPI_MCA_plm_rsh_agent",),
                           v1_env_lost="its ranks start over ssh instead, so the nodes' image must run an ssh server")
    cli_example = "--workers 2 --slots-per-worker 2 -- python allreduce.py"
    # the policy: ranks per node, the ssh keys' mount, and whether the launcher hosts ranks too
    trainer_policy_schema = obj(
        numProcPerNode={**INT32, "default": POLICY_DEFAULTS["numProcPerNode"], "minimum": 1},
        mpiImplementation={**STRING, "default": POLICY_DEFAULTS["mpiImplementation"], "enum": ["OpenMPI", ""]},
        sshAuthMountPath={**STRING, "default": POLICY_DEFAULTS["sshAuthMountPath"], "maxLength": 4096},
        runLauncherAsNode={**BOOLEAN, "default": POLICY_DEFAULTS["runLauncherAsNode"]},
    )
    trainer_runtimes = (
        TrainerRuntime("deepspeed-distributed", "deepspeed", "ghcr.io/kubeflow/trainer/deepspeed-runtime"),
        TrainerRuntime("mlx-distributed", "mlx", "ghcr.io/kubeflow/trainer/mlx-runtime"),
    )

    def topology(self, workers: int, **options: int) -> dict[str, int]:
        return {"Launcher": 1, "Worker": workers}

    def trainer_runtime_spec(self, image):
        # the node job's pods serve sshd; once they are ready the launcher (a node itself) runs mpirun over them
        pod, user = {"securityContext": {"fsGroup": RUNTIME_USER}}, {"securityContext": {"runAsUser": RUNTIME_USER}}
        node = trainer_job(NODE, image, ancestor=False, pod=pod, **user, command=["/usr/sbin/sshd"],
                           args=["-De", "-f", f"{RUNTIME_HOME}/.sshd_config"],
                           readinessProbe={"tcpSocket": {"port": RUNTIME_SSHD_PORT}, "initialDelaySeconds": 5})
        name = self.trainer_v2.launcher_type.lower()  # the replicatedJob that runs mpirun: the trainer's
        launcher = {**trainer_job(name, image, pod=pod, **user), "dependsOn": [{"name": NODE, "status": "Ready"}]}
        policy = {**POLICY_DEFAULTS, "sshAuthMountPath": f"{RUNTIME_HOME}/.ssh", "runLauncherAsNode": True}
        return {"mlPolicy": {"numNodes": 1, self.trainer_v2.policy: policy},
                "template": {"spec": {"network": {"publishNotReadyAddresses": True},
                                      "successPolicy": {"operator": "All", "targetReplicatedJobs": [name]},
                                      "replicatedJobs": [node, launcher]}}}

    def launcher_problem(self, command, version):
        # upstream's MPIJob example spells them Open MPI 4's way, which Open MPI 5 misreads
        old = [word for word in command[1:] if word in OPEN_MPI_5_DOUBLE_DASH]
        found = re.search(OPEN_MPI_VERSION, version()) if old else None
        if not found or int(found.group(1)) < 5:
            return None
        fixed = ", ".join(f"-{word}" for word in old)
        return (f"this machine's {command[0]} is Open MPI {found.group(0).split()[-1]}, which reads {' '.join(old)} "
                f"as the program to run (Executable: none): write {fixed}, which Open MPI 4 reads too")

    def command(self, command, workers, options):
        """The launcher runs the command under ``mpirun -np <ranks>`` unless it names a launcher itself."""
        if Path(command[0]).name in LAUNCHERS:
            return command
        ranks = (workers or 1) * (options.get("slots_per_worker") or 1)
        return ["mpirun", "--allow-run-as-root", "-np", str(ranks), "--bind-to", "none", *command]

    def takes_gpus(self, rtype):
        return rtype != "Launcher"

    def run_policy(self, spec):
        policy = super().run_policy(spec)
        if "cleanPodPolicy" not in policy and spec.get("cleanPodPolicy"):  # the deprecated top-level twin
            policy["cleanPodPolicy"] = spec["cleanPodPolicy"]
        return policy

    def admission_problems(self, spec):
        specs, path = self.replica_specs_at(spec)
        if "Launcher" not in specs:
            yield f"{path}.Launcher", "must be present: the launcher runs mpirun"
        elif (specs["Launcher"] or {}).get("replicas", 1) != 1:
            yield f"{path}.Launcher.replicas", "must be 1 (there is exactly one launcher)"

    def master_role(self, replica_types):
        return "Launcher"

    def status_role(self, replica_types):
        return "Launcher"

    def idle_command(self, rtype):
        return WORKER_IDLE_COMMAND if rtype == "Worker" else None

    def wired_containers(self, job, rtype, containers):
        return containers[:1]

    def user_env_wins(self, name):
        return name.startswith("I_MPI_")  # Intel MPI's bootstrap: a user's own choice stays

    def slots(self, job) -> int:
        return job.spec.get("slotsPerWorker") or 1

    def gpu_launcher(self, job) -> bool:
        containers = job.template("Launcher")["spec"].get("containers", [])
        limits = [key for c in containers for key in ((c.get("resources") or {}).get("limits") or {})]
        return any(key.endswith(".com/gpu") or "gpu" in key for key in limits)

    def env(self, job, rtype, index, network):
        if rtype != "Launcher":
            return []
        hostfile = os.path.join(network.files_dir, HOSTFILE) if not network.cluster else f"{CONFIG_DIR}/hostfile"
        if not network.cluster:
            return local_hostfile_env(hostfile)
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
        return self.cluster_hostfile(job)

    def cluster_hostfile(self, job) -> str:
        slots, workers = self.slots(job), job.replicas("Worker")
        lines = [f"{job.pod_name('Launcher', 0)} slots={slots}\n"] if self.gpu_launcher(job) else []
        return "".join(lines + [f"{job.pod_name('Worker', i)} slots={slots}\n" for i in range(workers)])

    # ---- locally: every rank on this machine ------------------------------------------------
    def local_env(self, job, rtype, index, state_dir):
        return run_as_root_env()

    def local_files(self, job, network):
        return {HOSTFILE: self.hostfile(job, network)}

    # ---- in a cluster: the launcher reaches workers with kubectl exec (contract 2.4) ----------
    def cluster_objects(self, job, pods):
        """ServiceAccount, ConfigMap (hostfile, kubexec.sh, discover_hosts.sh), Role and RoleBinding.

        Not touched again once the launcher finished, like upstream.
        """
        launcher = next((p for p in pods if p["metadata"]["name"] == job.pod_name("Launcher", 0)), None)
        if launcher and (launcher.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return []
        account = self.service_account(job)
        meta = {"namespace": job.namespace, "labels": {"app": job.name}}
        workers = [job.pod_name("Worker", i) for i in range(job.replicas("Worker"))]
        return [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, **meta}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{job.name}-config", **meta},
             "data": {"hostfile": self.cluster_hostfile(job), "kubexec.sh": self.kubexec(job),
                      "discover_hosts.sh": self.discover_hosts(job, pods)}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": f"{job.name}-launcher", **meta},
             "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                       {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"],
                        "resourceNames": workers}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": f"{job.name}-launcher", **meta},
             "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": job.namespace}],
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{job.name}-launcher"}},
        ]

    def service_account(self, job) -> str:
        return job.template("Launcher")["spec"].get("serviceAccountName") or f"{job.name}-launcher"

    @staticmethod
    def kubexec(job) -> str:
        container = f" --container {job.spec['mainContainer']}" if job.spec.get("mainContainer") else ""
        return ("#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n"
                f'{KUBECTL_DIR}/kubectl exec ${{POD_NAME}}{container} -- /bin/sh -c "$*"')

    def discover_hosts(self, job, pods) -> str:
        slots = self.slots(job)
        lines = [f"\necho {job.pod_name('Launcher', 0)}:{slots}"] if self.gpu_launcher(job) else []
        running = sorted(p["metadata"]["name"] for p in pods
                         if p["metadata"].get("labels", {}).get(LABEL_REPLICA_TYPE) == "worker"
                         and (p.get("status") or {}).get("phase") == "Running")
        return "#!/bin/sh" + "".join(lines + [f"\necho {name}:{slots}" for name in running])

    def decorate_pod(self, job, rtype, pod, network):
        spec = pod["spec"]
        main = spec["containers"][0]
        config = {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR}
        if rtype == "Worker":
            main["volumeMounts"] = (main.get("volumeMounts") or []) + [config]
            spec["volumes"] = (spec.get("volumes") or []) + [self.config_volume(job, [("kubexec.sh", EXECUTABLE)])]
            return
        spec.setdefault("serviceAccountName", self.service_account(job))
        kubectl = {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_DIR}
        spec["initContainers"] = (spec.get("initContainers") or []) + [{
            "name": "kubectl-delivery", "image": network.image(KUBECTL_DELIVERY_IMAGE),
            "imagePullPolicy": "IfNotPresent",
            "env": [env_var("TARGET_DIR", KUBECTL_DIR), env_var("NAMESPACE", job.namespace)],
            "volumeMounts": [kubectl, config],
            "resources": {kind: {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
                          for kind in ("limits", "requests")}}]
        main["volumeMounts"] = (main.get("volumeMounts") or []) + [kubectl, config]
        spec["volumes"] = (spec.get("volumes") or []) + [
            {"name": KUBECTL_VOLUME, "emptyDir": {}},
            self.config_volume(job, [("kubexec.sh", EXECUTABLE), ("hostfile", READ_ONLY),
                                     ("discover_hosts.sh", EXECUTABLE)])]

    @staticmethod
    def config_volume(job, items) -> dict:
        return {"name": CONFIG_VOLUME, "configMap": {"name": f"{job.name}-config", "items": [
            {"key": key, "path": key, "mode": mode} for key, mode in items]}}


FRAMEWORK = MPI()
