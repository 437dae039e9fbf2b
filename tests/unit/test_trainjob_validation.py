"""Every malformed job is refused in one line naming its field, exit 2, before anything runs or is planned: one table
over both APIs (a kubeflow.org/v1 PyTorchJob and a Trainer v2 TrainJob), each row the change to a valid document and
the field the refusal must name. Most rows go through validate(), which apply, submit and Client.submit all call;
the rows marked for a front-end go through it (the CLI in this process, or the Client), on the local backend."""

from __future__ import annotations

import copy
import time

import pytest
import yaml

from tests.fuzz.harness import private_state, run
from trainctl.core.validation import validate
from trainctl.errors import UserError

TRAINJOB = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tj"},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": 2, "command": ["python", "train.py"]}}}
CONTAINER = "spec.pytorchReplicaSpecs.Master.template.spec.containers[0]"
PYTORCHJOB = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pj"},
              "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
                  {"name": "pytorch", "image": "img", "command": ["python", "train.py"]}]}}}}}}
TRAINER = "spec.trainer"

# (api, the path changed, its new value, the field the refusal names, the front-end: None for validate())
ROWS = [
    ("v2", "metadata.labels", {"a\x1bb": "x"}, "metadata.labels", None),
    ("v2", "metadata.labels", {"a": "x\x00"}, "metadata.labels.a", None),
    ("v2", "metadata.labels", {"k" * 100_000: "x"}, "metadata.labels", None),
    ("v2", "metadata.labels", {"a": "v" * 100_000}, "metadata.labels.a", "apply"),
    ("v2", f"{TRAINER}.env", [{"name": "X", "value": "a\x00"}], f"{TRAINER}.env[0].value", None),
    ("v2", f"{TRAINER}.env", [{"name": "A=B", "value": "1"}], f"{TRAINER}.env[0].name", None),
    ("v2", f"{TRAINER}.env", [{"name": "1X", "value": "1"}], f"{TRAINER}.env[0].name", "client"),
    ("v2", f"{TRAINER}.env", [{"name": "$(whoami)", "value": "1"}], f"{TRAINER}.env[0].name", None),
    ("v2", f"{TRAINER}.env", {"A": "1"}, f"{TRAINER}.env", None),
    ("v2", f"{TRAINER}.args", ["a\x00"], f"{TRAINER}.args[0]", None),
    ("v2", f"{TRAINER}.command", ["python", 5], f"{TRAINER}.command[1]", "dry-run"),
    ("v2", f"{TRAINER}.resourcesPerNode", {"limits": {"cpu": "-1"}}, f"{TRAINER}.resourcesPerNode.limits.cpu", None),
    ("v2", f"{TRAINER}.resourcesPerNode", {"limits": {"cpu": "lots"}}, f"{TRAINER}.resourcesPerNode.limits.cpu", None),
    ("v2", f"{TRAINER}.resourcesPerNode", {"limits": {"nvidia.com/gpu": "500m"}},
     f"{TRAINER}.resourcesPerNode.limits.nvidia.com/gpu", None),
    ("v2", f"{TRAINER}.numNodes", 0, f"{TRAINER}.numNodes", None),
    ("v2", f"{TRAINER}.numNodes", -1, f"{TRAINER}.numNodes", None),
    ("v2", f"{TRAINER}.numNodes", 1_000_000_000, f"{TRAINER}.numNodes", "dry-run"),
    ("v2", f"{TRAINER}.numProcPerNode", 0, f"{TRAINER}.numProcPerNode", None),
    ("v2", f"{TRAINER}.numNode", 2, f"{TRAINER}.numNode", "apply"),
    ("v2", TRAINER, "python train.py", TRAINER, None),
    ("v2", "spec", ["x"], "spec", None),
    ("v2", "spec.initializer", {"dataset": {"env": [{"name": "A=B"}]}}, "spec.initializer.dataset.env[0].name", None),
    ("v2", "spec.managedBy", "someone/else", "spec.managedBy", None),
    ("v2", "kind", "Trainjob", "kind", "dry-run"),
    ("v2", "spec.managedBy", "kueue.x-k8s.io/multikueue", "spec.managedBy", "dry-run"),
    ("v1", "metadata.labels", {"a\x1bb": "x"}, "metadata.labels", None),
    ("v1", f"{CONTAINER}.env", [{"name": "A=B", "value": "1"}], f"{CONTAINER}.env[0].name", None),
    ("v1", f"{CONTAINER}.command", ["python", 5], f"{CONTAINER}.command[1]", None),
    ("v1", f"{CONTAINER}.resources", {"limits": {"cpu": "lots"}}, f"{CONTAINER}.resources.limits.cpu", "client"),
    ("v1", "spec.pytorchReplicaSpecs.Master.replicas", 0, "spec.pytorchReplicaSpecs.Master.replicas", None),
    ("v1", "spec.pytorchReplicaSpecs.Master.replica", 2, "spec.pytorchReplicaSpecs.Master.replica", "apply"),
    ("v1", "spec.runPolicy", {"managedBy": "kueue.x-k8s.io/multikueue"}, "spec.runPolicy.managedBy", "dry-run"),
]


def changed(api: str, path: str, value) -> dict:
    document = copy.deepcopy(TRAINJOB if api == "v2" else PYTORCHJOB)
    node = document
    *parents, last = [int(key) if key.isdigit() else key for key in
                      path.replace("[", ".").replace("]", "").split(".")]
    for key in parents:
        node = node[key]
    node[last] = value
    return document


def refusal(document: dict, via: str | None) -> str:
    """The one line that refuses ``document`` through ``via``."""
    if via is None:
        with pytest.raises(UserError) as refused:
            validate(document)
        return refused.value.message
    with private_state() as (scratch, _):
        if via == "client":
            from trainctl.sdk.client import Client

            with pytest.raises(UserError) as refused:
                Client(backend="local").submit(document)
            return refused.value.message
        (scratch / "job.yaml").write_text(yaml.safe_dump(document))
        result = run("apply", "-f", "job.yaml", *(["--dry-run"] if via == "dry-run" else []))
        assert result.code == 2 and not (scratch / "home" / "jobs").exists()
        return result.stderr


@pytest.mark.parametrize(("api", "path", "value", "field", "via"), ROWS,
                         ids=[f"{row[0]}-{row[1]}={str(row[2])[:20]!r}-{row[4]}" for row in ROWS])
def test_a_bad_field_is_refused_in_one_line_naming_it(api, path, value, field, via):
    started = time.process_time()
    message = refusal(changed(api, path, value), via)
    assert len(message.strip().splitlines()) == 1
    assert f"{field}:" in message, message
    assert time.process_time() - started < 1  # nothing planned: numNodes 1e9 is refused from the number


@pytest.mark.parametrize(("args", "field"), [
    (["--workers", "1000000000"], "spec.trainer.numNodes"),
    (["--env", "A=\x01"], None),
])
def test_submit_api_v2_refuses_before_planning(args, field):
    with private_state():
        started = time.process_time()
        result = run("submit", "pytorch", "--api", "v2", "--dry-run", *args, "--", "python", "train.py")
    assert result.code in (0, 2) and time.process_time() - started < 1
    if field:
        assert result.code == 2 and f"{field}:" in result.stderr


def test_client_run_api_v2_refuses_a_billion_nodes_before_planning():
    from trainctl.sdk.client import Client

    with private_state():
        started = time.process_time()
        with pytest.raises(UserError, match="spec.trainer.numNodes:"):
            Client(backend="local").run(["python", "train.py"], api="v2", workers=1_000_000_000, dry_run=True)
    assert time.process_time() - started < 1


def test_a_refusal_in_a_file_of_several_documents_names_its_own_document(tmp_path):
    runtime = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "rt"},
               "spec": {"mlPolicy": {"torch": {}, "mpi": {}}}}
    good = changed("v2", "spec.runtimeRef", {"name": "rt", "kind": "TrainingRuntime"})
    bad = changed("v2", f"{TRAINER}.numNode", 2)
    with private_state() as (scratch, _):
        (scratch / "jobs.yaml").write_text(yaml.safe_dump_all([good, bad]))
        assert "(document 2): TrainJob" in run("apply", "-f", "jobs.yaml", "--dry-run").stderr
        (scratch / "jobs.yaml").write_text(yaml.safe_dump_all([good, runtime]))
        result = run("apply", "-f", "jobs.yaml", "--dry-run")
        assert "(document 2): runtime 'rt': spec.mlPolicy names mpi and torch: keep one" in result.stderr
        # convert takes the same runtime no more than apply does
        assert "spec.mlPolicy names mpi and torch" in run("convert", "-f", "jobs.yaml").stderr
