"""PyTorchJob: Master 1 + Worker N-1, torchrun-style env (MASTER_ADDR, RANK, PET_*)."""

import os
import re

from trainctl.frameworks._schema import BOOLEAN, INT32, METRICS, STRING, obj
from trainctl.frameworks.base import (NODE, PYTHONUNBUFFERED, Framework, FunctionLaunch, HelperImage, KindOption,
                                      ScriptRunner, TrainerRuntime, TrainerV2, env_var, peer_loss)

TORCHRUN = ("-m", "torch.distributed.run")
# upstream's --pytorch-init-container-image, and its default
INIT_IMAGE = HelperImage("pytorch_init_image", "--pytorch-init-container-image", "alpine:3.10", (
    "Image of the init container that holds PyTorch workers until the master's name resolves (needs sh, "
    "seq, sleep and nslookup, as alpine and busybox have). Default: alpine:3.10."))


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
    peer_loss_signatures = (
        # a rank in a collective when another one's process ended: "[.../gloo/transport/tcp/pair.cc:553]
        # Connection closed by peer [127.0.0.1]:28344. This is typically caused by a remote worker crashing."
        peer_loss("gloo", r"gloo/transport/\S+\].*(?:[Cc]onnection (?:closed|reset) by peer|Socket closed|Broken pipe)",
                  r"typically caused by a remote worker crashing", r"gloo::IoException"),
        peer_loss("NCCL", r"remote process exited or there was a network error",
                  r"remote process exiting prematurely", r"NCCL communicator was aborted",
                  r"[Ww]atchdog caught collective operation timeout",
                  r"Process group watchdog thread terminated with exception", r"Connection closed by remote peer"),
        # the rendezvous store lives in the master: when it is gone, the others' next store call fails
        peer_loss("c10d store", r"Connection was likely closed\. Did the remote server shutdown or crash",
                  r"DistNetworkError.*(?:[Cc]onnection reset by peer|Broken pipe)"),
        peer_loss("torchrun", r"RendezvousClosedError"),
    )
    launcher_reports = ("ChildFailedError",)
    leader_types = ("Master",)
    every_replica_runs_to_the_end = True
    default_workers = 2
    options = (KindOption("nproc_per_node", str, "processes per node (int, auto, cpu, gpu)."),)
    # what torchrun gives each process, for a function job's one process per replica when no torchrun ran it;
    # under torchrun (--nproc-per-node) a replica's local rank 0 reports its progress
    function_launch = FunctionLaunch(rank_variables=("RANK",), world_variables=("WORLD_SIZE",), defaults=(
        ("LOCAL_RANK", "0", None), ("LOCAL_WORLD_SIZE", "1", None), ("GROUP_RANK", "0", "RANK"),
        ("GROUP_WORLD_SIZE", "1", "WORLD_SIZE"), ("ROLE_RANK", "0", "RANK"), ("ROLE_WORLD_SIZE", "1", "WORLD_SIZE"),
        ("ROLE_NAME", "default", None), ("TORCHELASTIC_RESTART_COUNT", "0", None)),
        launcher="torchrun", replica_ranks=("LOCAL_RANK",), shared_rank=("RANK", "LOCAL_WORLD_SIZE"))
    script_runners = (ScriptRunner(
        "torchrun", switches=frozenset({"--standalone", "--run-path", "--run_path", "--virtual-local-rank",
                                        "--virtual_local_rank"}),
        no_file=frozenset({"-m", "--module", "--no-python", "--no_python"})),)
    helper_images = (INIT_IMAGE,)
    # v2's torch plugin sets only PET_*: torchrun turns them into what v1 set itself (v2_command)
    trainer_v2 = TrainerV2("torch", "torch", "torch-distributed", node_types=("Master", "Worker"),
                           proc_field="nprocPerNode", v1_env=("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"))
    trainer_runtimes = (TrainerRuntime(trainer_v2.runtime, trainer_v2.label,
                                       "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"),)
    # and in the containers besides that envInjection names
    trainer_policy_schema = obj(envInjection=obj(targets={
        "type": "array", "maxItems": 16, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["jobName"],
        "items": {**obj(jobName={**STRING, "minLength": 1, "maxLength": 253}, containerNames={
            "type": "array", "minItems": 1, "maxItems": 8, "x-kubernetes-list-type": "set",
            "items": {**STRING, "maxLength": 63},
            "x-kubernetes-validations": [{
                "rule": f"!self.exists(c, c == '{NODE}')",
                "message": f"containerNames must not include the main {NODE} container because PET_* envs are "
                           "always injected into it"}]}),
            "required": ["containerNames", "jobName"]}}))
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

    def function_command(self, python, runner, options):
        # several processes per node: torchrun starts them; one: the runner sets what torchrun would
        return [python, *TORCHRUN, runner] if options.get("nproc_per_node") is not None else [python, runner]

    def v2_command(self, command, args):
        # A script that python itself runs read MASTER_ADDR, RANK and WORLD_SIZE from v1's env; under v2 torchrun,
        # started by the same interpreter, gives them to it from the PET_* variables.
        words = [*command, *args]
        if command and os.path.basename(command[0]) == "torchrun":
            return command
        if not command or not re.fullmatch(r"python[0-9.]*", os.path.basename(command[0])) or len(words) < 2:
            return None  # a shell, the image's entrypoint: nothing to put a launcher in front of
        if tuple(words[1:3]) == TORCHRUN:
            return command
        if words[1].startswith("-") and words[1] != "-m":
            return None  # python -c '...', or interpreter options
        return [command[0], *TORCHRUN, *command[1:]]

    def admission_problems(self, spec):
        specs, path = self.replica_specs_at(spec)
        yield from self.one_replica(specs, path, "Master")
        elastic = spec.get("elasticPolicy")
        if elastic is not None and "Worker" not in specs:
            yield f"{path}.Worker", "must be configured if elastic policy is used"
        if elastic and elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
            yield "spec.elasticPolicy.nProcPerNode", "must not be used with spec.nprocPerNode"

    def master_role(self, replica_types):
        return "Master" if "Master" in replica_types else "Worker"

    def prepare_pod(self, job, rtype, index, spec, network):
        # in a cluster a worker waits until the master's name resolves (upstream's init container)
        if rtype == "Worker" and "Master" in job.replica_types and network.cluster:
            spec["initContainers"] = (spec.get("initContainers") or []) + [self.wait_for_master(job, network)]

    @staticmethod
    def wait_for_master(job, network) -> dict:
        master = job.pod_name("Master", 0)
        # [quirk] upstream's test is nslookup's exit status, which busybox >= 1.28 makes non-zero when
        # any search-domain candidate is NXDOMAIN, even once the master's own name resolves: wait for
        # an answer instead. (The master's name is a validated DNS label: safe in the script.)
        # [deviation] the trap: a shell that is its container's PID 1 ignores SIGTERM without one, so a worker
        # deleted while it waits (cleanPodPolicy, TTL, suspend, a restart) held its pod the 30 s grace period
        script = (f"trap 'exit 143' TERM;err=1;for i in $(seq 100); do if nslookup {master} 2>/dev/null | grep -q '^Name:'; "
                  "then err=0 && break; fi;echo waiting for master; sleep 2; done; exit $err")
        return {"name": "init-pytorch", "image": network.image(INIT_IMAGE), "imagePullPolicy": "IfNotPresent",
                "resources": {"limits": {"cpu": "100m", "memory": "20Mi"},
                              "requests": {"cpu": "50m", "memory": "10Mi"}},
                "command": ["sh", "-c", script]}

    def succeeded(self, job, rtype, counts, observed):
        # an elastic worker-only job is done when any worker finishes
        if rtype == "Worker" and job.spec.get("elasticPolicy") and counts.get("succeeded", 0) > 0:
            return True
        return super().succeeded(job, rtype, counts, observed)

    def env(self, job, rtype, index, network):
        env = [PYTHONUNBUFFERED]
        spec, types = job.spec, job.replica_types
        elastic = spec.get("elasticPolicy")
        nproc = spec.get("nprocPerNode")
        if nproc is None and not (elastic and elastic.get("nProcPerNode") is not None):
            nproc = "auto"
        if "Master" in types:
            port, host = network.port(job, "Master", 0), network.host(job, "Master", 0)
            rank = index if rtype == "Master" else index + job.replicas("Master")
            nproc_int = int(nproc) if nproc is not None and str(nproc).isdigit() else 1
            env += [env_var("MASTER_PORT", port), env_var("PET_MASTER_PORT", port),
                    env_var("MASTER_ADDR", host), env_var("PET_MASTER_ADDR", host),
                    env_var("WORLD_SIZE", job.total_replicas * nproc_int),
                    env_var("RANK", rank), env_var("PET_NODE_RANK", rank)]
        if nproc is not None:
            env.append(env_var("PET_NPROC_PER_NODE", nproc))
        if elastic is None:
            return env + [env_var("PET_NNODES", job.total_replicas)]
        return env + self.elastic_env(job, elastic, network)

    def restart_env(self, attempt):
        # torchrun's count of its worker group's restarts: elastic-aware code reads it to resume
        return [env_var("TORCHELASTIC_RESTART_COUNT", attempt)]

    def elastic_env(self, job, elastic, network):
        host = elastic.get("rdzvHost") or network.host(job, "Worker", 0)
        port = elastic.get("rdzvPort") or network.port(job, "Worker", 0)
        low, high = self.elastic_bounds(job, elastic)
        env = [env_var("PET_RDZV_ENDPOINT", f"{host}:{port}"),
               env_var("PET_RDZV_BACKEND", elastic.get("rdzvBackend") or "c10d"),
               env_var("PET_NNODES", f"{low}:{high}")]
        optional = [("PET_MAX_RESTARTS", elastic.get("maxRestarts")),
                    ("PET_NPROC_PER_NODE", elastic.get("nProcPerNode")),
                    ("PET_RDZV_ID", elastic.get("rdzvId"))]
        env += [env_var(name, value) for name, value in optional if value is not None]
        if elastic.get("rdzvConf") is not None:
            # The CRD requires neither field; upstream formats a missing one as Go's empty string.
            conf = ",".join(f"{item.get('key', '')}={item.get('value', '')}" for item in elastic["rdzvConf"])
            env.append(env_var("PET_RDZV_CONF", conf))
        if elastic.get("standalone"):
            env.append(env_var("PET_STANDALONE", ""))
        return env

    @staticmethod
    def elastic_bounds(job, elastic) -> tuple[int, int]:
        """min/max Worker replicas: both default to Worker.replicas, one given copies to the other."""
        low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
        if low is None and high is None:
            low = high = job.replicas("Worker")
        return (low if low is not None else high), (high if high is not None else low)

    # ---- in a cluster: elastic jobs scale through an HPA on the scale subresource (contract 2.1.5) ----
    # None for a job queued in Kueue: Kueue admitted its replica counts and would stop it on a change.
    pruned_kinds = ("HorizontalPodAutoscaler",)

    def cluster_objects(self, job, pods):
        elastic = job.spec.get("elasticPolicy") or {}
        if elastic.get("metrics") is None or job.suspended or job.kueue_queue:
            return []
        low, high = self.elastic_bounds(job, elastic)
        return [{"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                 "metadata": {"name": job.name, "namespace": job.namespace},
                 "spec": {"scaleTargetRef": {"kind": self.kind, "name": job.name, "apiVersion": "kubeflow.org/v1"},
                          "minReplicas": low, "maxReplicas": high, "metrics": elastic["metrics"]}}]


FRAMEWORK = PyTorch()
