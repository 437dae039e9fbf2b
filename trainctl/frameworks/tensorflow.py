"""TFJob: N Worker (plus PS, Chief, Evaluator); TF_CONFIG on the tensorflow container."""

import json

from trainctl.frameworks._schema import BOOLEAN, STRING
from trainctl.frameworks.base import Framework, FunctionLaunch, KindOption, TrainerV2, env_var, peer_loss


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
    peer_loss_signatures = (
        # gRPC to a task that is gone (a parameter server, a collective peer), the coordination
        # service's verdict on it, and collectives aborted because a peer failed or restarted
        peer_loss("TensorFlow", r"UnavailableError", r"PSUnavailableError", r"Collective ops is aborted by",
                  r"unexpectedly tried to connect with a different incarnation",
                  r"has failed, got preempted, or crashed unexpectedly", r"failed to connect to all addresses",
                  r"Socket closed"),
    )
    spec_properties = {"successPolicy": STRING, "enableDynamicWorker": BOOLEAN}
    leader_types = ("Chief", "Master")
    options = (
        KindOption("ps", int, "parameter servers.", minimum=0),
        KindOption("chief", int, "1 for a Chief replica.", minimum=0,
                   problem=lambda count: "a TFJob has at most one chief" if count > 1 else None),
        KindOption("evaluator", int, "evaluator replicas.", minimum=0),
    )
    # rank 0 is the chief (or master) if the cluster has one, else worker 0; a single replica has no TF_CONFIG
    function_launch = FunctionLaunch(cluster_spec="TF_CONFIG", leader_tasks=("chief", "master"))
    cli_example = "--workers 2 --ps 1 --dry-run -o yaml -- python train.py"
    # no runtime ships (trainer#2699): a plain one, and the command writes TF_CONFIG itself
    trainer_v2 = TrainerV2(None, "tensorflow", v1_env=("TF_CONFIG",))
    title = "TensorFlow"

    def topology(self, workers: int, **options: int) -> dict[str, int]:
        counts = {"Chief": options.get("chief", 0), "Evaluator": options.get("evaluator", 0),
                  "PS": options.get("ps", 0), "Worker": workers}
        return {rtype: n for rtype, n in counts.items() if n > 0}

    def admission_problems(self, spec):
        specs, path = self.replica_specs_at(spec)
        if "Chief" in specs and "Master" in specs:
            yield path, "must not have both Chief and Master (they are the same role)"
        for role in ("Chief", "Master"):
            if (specs.get(role) or {}).get("replicas", 1) > 1:
                yield f"{path}.{role}.replicas", "must be 1"

    def master_role(self, replica_types):
        return self.status_role(replica_types)

    def status_role(self, replica_types):
        return next((t for t in ("Chief", "Master") if t in replica_types), "Worker")

    def lockstep(self, replica_types):
        # workers of a parameter server train on while another worker is gone, and an evaluator meets nobody
        return "PS" not in replica_types and "Evaluator" not in replica_types

    def succeeded(self, job, rtype, counts, observed):
        if super().succeeded(job, rtype, counts, observed):
            return True
        # without a chief, worker-0 finishing with exit 0 ends the job unless successPolicy is AllWorkers
        if rtype != "Worker" or job.spec.get("successPolicy") == "AllWorkers":
            return False
        return any(r.rtype == "Worker" and r.index == 0 and r.phase == "Succeeded" and r.exit_code == 0
                   for r in observed)

    def failure_ends_job(self, job, rtype):
        # with dynamic workers, workers come and go: a failed one does not fail the job
        return not (rtype == "Worker" and job.spec.get("enableDynamicWorker"))

    def wired_containers(self, job, rtype, containers):
        return [c for c in containers if c.get("name") == self.container]

    def env(self, job, rtype, index, network):
        if job.total_replicas == 1:
            return []
        return [env_var("TF_CONFIG", self.tf_config(job, rtype, index, network))]

    def tf_config(self, job, rtype, index, network) -> str:
        """TF_CONFIG exactly as the operator serialises it (Go: sorted map keys, no spaces)."""
        def address(t, i):
            return f"{network.qualified_host(job, t, i)}:{network.port(job, t, i)}"

        task = {"type": rtype.lower(), "index": index}
        if job.spec.get("enableDynamicWorker"):
            ps = [address("PS", i) for i in range(job.replicas("PS"))] if "PS" in job.replica_types else None
            if rtype == "Worker":
                cluster = {"worker": {str(index): address(rtype, index)}, "ps": ps}
            elif rtype == "PS":
                cluster = {"worker": {}, "ps": [address(rtype, index)]}
            else:
                cluster = {"worker": {}, "ps": []}
            return json.dumps({"cluster": cluster, "task": task}, separators=(",", ":"))
        cluster = {t.lower(): [address(t, i) for i in range(job.replicas(t))] for t in job.replica_types}
        config = {"cluster": dict(sorted(cluster.items())), "task": task, "environment": "cloud"}
        return json.dumps(config, separators=(",", ":"))


FRAMEWORK = TensorFlow()
