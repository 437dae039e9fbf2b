"""``trainctl submit --api v2``, ``apply -f`` and ``export`` of TrainJobs against a cluster (issue 41, points 1 and 3):
the TrainJob submit renders is created on the cluster, trainctl's controller runs it on its runtime, and ``wait`` and
``export`` read it back; the create's preflight says in one line what the cluster lacks for it. The node fixture
plays kubelet."""

from __future__ import annotations

import pytest
import yaml

from tests.controller.test_trainjobs import TRAINJOBS, ns, running, torch_runtime  # noqa: F401  (ns: a fixture)
from trainctl.kube import trainer_resource

pytestmark = pytest.mark.k8s
RUNTIMES = trainer_resource("TrainingRuntime")


def test_submit_api_v2_creates_a_trainjob_the_controller_runs_and_export_keeps(rest, kube_node, ns, trainctl,
                                                                                tmp_path):
    arguments = ["submit", "--api", "v2", "pytorch", "--workers", "2", "--no-workdir", "--name", "sub", "-n", ns,
                 "-e", "LR=0.1", "--", "python", "train.py"]
    shown = trainctl(*arguments[:-3], "--dry-run", *arguments[-3:])  # the API server's own dry run: nothing stored
    assert shown.returncode == 0 and yaml.safe_load(shown.stdout)["kind"] == "TrainJob", shown.stderr
    assert rest.list(TRAINJOBS, ns)["items"] == []
    submitted = trainctl(*arguments)
    assert submitted.returncode == 0 and "submitted trainjob/sub (2 nodes x 1 process)" in submitted.stdout, \
        submitted.stdout + submitted.stderr
    stored = rest.get(TRAINJOBS, "sub", ns)
    assert stored["spec"]["runtimeRef"]["name"] == "torch-distributed" and stored["spec"]["trainer"]["numNodes"] == 2
    pods = running(rest, ns, "sub")
    node = next(c for c in pods["sub-node-0-1"]["spec"]["containers"] if c["name"] == "node")
    assert node["command"] == ["python", "-m", "torch.distributed.run", "train.py"]  # v1's env from torchrun
    env = {e["name"]: e.get("value") for e in node["env"]}
    assert (env["PET_NNODES"], env["PET_NPROC_PER_NODE"], env["LR"]) == ("2", "1", "0.1")
    for index in (0, 1):
        kube_node.set_phase(ns, f"sub-node-0-{index}", "Succeeded", exit_code=0)
    waited = trainctl("wait", "sub", "-n", ns, "--timeout", "30s")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    exported = trainctl("export", "sub", "-n", ns, "-o", str(tmp_path / "record"))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    kept = yaml.safe_load((tmp_path / "record" / "job.yaml").read_text())
    assert (kept["kind"], kept["metadata"]["name"]) == ("TrainJob", "sub")


def test_apply_of_a_trainjob_names_a_missing_runtime_in_one_line_and_creates_one_on_a_present_runtime(
        rest, kubeflow_crds, namespace, trainctl, tmp_path):
    ns = namespace  # no controller: what is checked is the create
    installed = trainctl("runtimes", "install", "torch-distributed")
    assert installed.returncode == 0, installed.stderr
    def trainjob(name: str, kind: str, runtime: str) -> str:
        job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
               "spec": {"runtimeRef": {"kind": kind, "name": runtime},
                        "trainer": {"numNodes": 1, "command": ["python", "train.py"]}}}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(job))
        return str(path)

    missing = trainctl("apply", "-f", trainjob("lost", "TrainingRuntime", "mine"), "-n", ns)
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0, missing.stdout + missing.stderr
    assert f"TrainJob lost runs on TrainingRuntime 'mine', which does not exist in namespace \"{ns}\"" \
        in missing.stderr, missing.stderr
    applied = trainctl("apply", "-f", trainjob("found", "ClusterTrainingRuntime", "torch-distributed"), "-n", ns)
    assert applied.returncode == 0 and "applied trainjob/found" in applied.stdout, applied.stdout + applied.stderr
    assert rest.get(TRAINJOBS, "found", ns)["spec"]["trainer"]["command"] == ["python", "train.py"]
    runtime = {**torch_runtime(trainctl), "kind": "TrainingRuntime", "metadata": {"name": "mine"}}
    beside = tmp_path / "beside.yaml"  # the runtime given in the file: created first, as kubectl apply -f would
    beside.write_text(open(trainjob("given", "TrainingRuntime", "mine")).read() + "---\n" + yaml.safe_dump(runtime))
    applied = trainctl("apply", "-f", str(beside), "-n", ns)
    assert applied.returncode == 0 and "applied trainjob/given" in applied.stdout, applied.stdout + applied.stderr
    assert f"trainingruntime/mine created in namespace {ns}" in applied.stdout, applied.stdout
    created = rest.get(RUNTIMES, "mine", ns)  # what the SDK's get_runtime reads (the API server fills defaults in)
    assert created["spec"]["mlPolicy"] == runtime["spec"]["mlPolicy"]
    assert [rj["name"] for rj in created["spec"]["template"]["spec"]["replicatedJobs"]] == ["node"]
    stored = rest.get(TRAINJOBS, "given", ns)  # the controller snapshots the runtime, trainctl apply does not
    assert "trainctl.io/runtime-snapshot" not in (stored["metadata"].get("annotations") or {})
    again = trainctl("apply", "-f", str(beside), "-n", ns, "--replace")
    assert again.returncode == 0 and f"trainingruntime/mine unchanged in namespace {ns}" in again.stdout, \
        again.stdout + again.stderr
