"""mlPolicy.mpi: an MPI launcher and its nodes (upstream pkg/runtime/framework/plugins/mpi/mpi.go).

The runtime has two replicatedJobs: ``node`` (pods that wait, sshd in the shipped runtimes) and ``launcher``
(the trainer, which runs ``mpirun``). The TrainJob's numNodes sizes ``node`` (one fewer where the launcher runs as a
node too, at least 1); each node has ``slots`` processes: the TrainJob's numProcPerNode, else the runtime's, raised to
the node's GPU count where that is 1. The launcher gets the hostfile (``/etc/mpi/hostfile``: one line
``<pod's DNS name> slots=<n>`` per node pod, in the runtime's order of replicatedJobs, the launcher's among
them where it runs as a node) and OpenMPI's variables; both
get the job's SSH key. Only OpenMPI is implemented upstream.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainctl.frameworks.mpi import LOCAL_UNBOUND, WORKER_IDLE_COMMAND, local_hostfile_env, run_as_root_env
from trainctl.frameworks.policies.base import NODE, Info, PodSet, Policy, gpus, upsert_env, value_env

LAUNCHER = "launcher"  # constants.Launcher
OPENMPI = "OpenMPI"
HOSTFILE_DIR, HOSTFILE_NAME = "/etc/mpi", "hostfile"
HOSTFILE = f"{HOSTFILE_DIR}/{HOSTFILE_NAME}"
SSH_VOLUME, HOSTFILE_VOLUME = "mpi-ssh-auth", "mpi-hostfile"
SSH_SECRET_SUFFIX, HOSTFILE_CONFIGMAP_SUFFIX = "-mpi-ssh-auth", "-mpi-hostfile"
DEFAULT_SSH_PATH = "/root/.ssh"  # the CRD's default of sshAuthMountPath
HOSTFILE_ENV, KEEP_FQDN_ENV = "OMPI_MCA_orte_default_hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames"
SLOTS_ENV, RSH_ARGS_ENV = "OMPI_MCA_orte_set_default_slots", "OMPI_MCA_plm_rsh_args"
RSH_ARGS = "-o ConnectionAttempts=10"
SSH_AUTH_TYPE = "kubernetes.io/ssh-auth"  # corev1.SecretTypeSSHAuth: keys ssh-privatekey (and upstream's ssh-publickey)


def launcher_as_node(section: dict) -> bool:
    return bool(section.get("runLauncherAsNode", False))


def ssh_volume(job_name: str) -> dict:
    """The job's SSH key pair (Secret ``<job>-mpi-ssh-auth``) as the files ssh reads."""
    items = [{"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
             {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
             {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644}]
    return {"name": SSH_VOLUME,
            "secret": {"secretName": f"{job_name}{SSH_SECRET_SUFFIX}", "defaultMode": 0o400, "items": items}}


def hostfile_volume(job_name: str) -> dict:
    return {"name": HOSTFILE_VOLUME, "configMap": {"name": f"{job_name}{HOSTFILE_CONFIGMAP_SUFFIX}",
                                                   "items": [{"key": HOSTFILE_NAME, "path": HOSTFILE_NAME, "mode": 0o444}]}}


def upsert_named(entries: list[dict], entry: dict) -> None:
    """apply.UpsertVolumes / UpsertVolumeMounts: an entry of the same name is replaced where it stands."""
    names = [existing.get("name") for existing in entries]
    if entry["name"] in names:
        entries[names.index(entry["name"])] = entry
    else:
        entries.append(entry)


class MPI(Policy):
    key = "mpi"
    reserved_env = frozenset({HOSTFILE_ENV, KEEP_FQDN_ENV, SLOTS_ENV, RSH_ARGS_ENV})

    def trainer_jobs(self, section: dict) -> tuple[str, ...]:
        return (NODE,) if launcher_as_node(section) else ()

    def problems(self, info: Info) -> list[str]:
        found = super().problems(info)
        if (info.requested_nodes() or 1) >= 2 and launcher_as_node(info.section) and not (
                info.by_name(LAUNCHER) and info.by_name(NODE)):
            found.append("spec.trainer.numNodes must be 1: the runtime runs its launcher as a node but lacks "
                         f"a {LAUNCHER} or a {NODE} replicatedJob")
        if info.section.get("mpiImplementation", OPENMPI) != OPENMPI:
            found.append(f"the runtime's mpiImplementation {info.section['mpiImplementation']!r} is not supported: "
                         f"use {OPENMPI}")
        return found

    def enforce(self, info: Info) -> None:
        section = info.section
        node = info.by_name(NODE)
        if node is not None and info.requested_nodes() is not None:
            node.count = max(info.requested_nodes() - 1, 1) if launcher_as_node(section) else info.requested_nodes()
        section.setdefault("numProcPerNode", 1)
        if (info.trainer or {}).get("numProcPerNode") is not None:
            section["numProcPerNode"] = info.trainer["numProcPerNode"]
        elif section["numProcPerNode"] == 1 and gpus(info.resources_per_node()) > 1:
            section["numProcPerNode"] = gpus(info.resources_per_node())
        for pod_set in info.pod_sets:
            if pod_set.name in (NODE, LAUNCHER):
                self.wire(info, pod_set)

    def wire(self, info: Info, pod_set: PodSet) -> None:
        """The SSH key on node and launcher pods; the hostfile and OpenMPI's variables on the launcher's."""
        upsert_named(pod_set.volumes, ssh_volume(info.job_name))
        if pod_set.name == LAUNCHER:
            upsert_named(pod_set.volumes, hostfile_volume(info.job_name))
        container = pod_set.container(NODE)
        if container is None:
            return
        mounts = container.setdefault("volumeMounts", [])
        upsert_named(mounts, {"name": SSH_VOLUME, "mountPath": info.section.get("sshAuthMountPath", DEFAULT_SSH_PATH)})
        if pod_set.name == LAUNCHER:
            upsert_named(mounts, {"name": HOSTFILE_VOLUME, "mountPath": HOSTFILE_DIR})
            upsert_env(container.setdefault("env", []), value_env(HOSTFILE_ENV, HOSTFILE), value_env(KEEP_FQDN_ENV, "true"),
                       value_env(SLOTS_ENV, info.section["numProcPerNode"]), value_env(RSH_ARGS_ENV, RSH_ARGS))

    def files(self, info: Info) -> dict[str, dict[str, str]]:
        """The hostfile (ConfigMap ``<job>-mpi-hostfile``), mounted on the launcher. A host that several pods share
        (locally, 127.0.0.1 for every one) is one line with their slots together: Open MPI refuses a host twice."""
        slots, found = info.section.get("numProcPerNode", 1), {}
        for pod_set in info.pod_sets:
            if pod_set.name == NODE or (launcher_as_node(info.section) and pod_set.name == LAUNCHER):
                for host in pod_set.endpoints:
                    found[host] = found.get(host, 0) + int(slots)
        return {LAUNCHER: {HOSTFILE: "".join(f"{host} slots={count}\n" for host, count in found.items())}}

    def cluster_objects(self, job_name: str, files: Mapping[str, Mapping[str, str]]) -> list[dict]:
        """The launcher's hostfile as the ConfigMap its volume names, and the Secret of the job's SSH key pair that
        node and launcher pods mount (immutable, as upstream makes it; the key pair is made as it is created)."""
        return [{"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": f"{job_name}{HOSTFILE_CONFIGMAP_SUFFIX}"},
                 "data": {HOSTFILE_NAME: files[LAUNCHER][HOSTFILE]}},
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{job_name}{SSH_SECRET_SUFFIX}"},
                 "type": SSH_AUTH_TYPE, "immutable": True}]

    # ---- locally: mpirun starts every rank on this machine itself, as for an MPIJob (frameworks/mpi.py) -------
    def idle_jobs(self, info: Info) -> dict[str, dict]:
        """The nodes, beside a launcher: their pods serve sshd for its mpirun, which locally needs none."""
        return {NODE: WORKER_IDLE_COMMAND} if info.by_name(LAUNCHER) and info.by_name(NODE) else {}

    def local_env(self, replicated_job: str, files: Mapping[str, str]) -> list[dict]:
        """Open MPI's leave to run as root; on the launcher the hostfile's local copy, and ranks not bound to cores:
        the nodes' slots all share this machine's."""
        if HOSTFILE not in files:
            return [value_env(name, value) for name, value in run_as_root_env().items()]
        return [value_env(name, value) for name, value in {**run_as_root_env(), **LOCAL_UNBOUND}.items()] + \
            local_hostfile_env(files[HOSTFILE])


POLICY = MPI()
