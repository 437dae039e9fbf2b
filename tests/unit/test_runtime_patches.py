"""A TrainJob's spec.runtimePatches in its pod plan (trainctl/core/runtime_patches.py): each field upstream's
PodSpecPatch allows lands in the pods of the replicatedJob it names and no other, merged as upstream's strategic
merge patch merges it (trainingruntime.go mergeRuntimePatches); what upstream's admission refuses (jobset.go
ValidateObjects) is one line."""

from __future__ import annotations

import pytest

from tests.unit.test_trainjob_plan import runtime, trainjob
from trainctl.core.trainjob import plan
from trainctl.errors import UserError


def patch(job: str, manager: str = "example.com/m", metadata: dict | None = None, **pod_spec) -> dict:
    template = {"spec": pod_spec, **({"metadata": metadata} if metadata else {})}
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": job, "template": {"metadata": {"labels": {"job-level": job}},
                                   "spec": {"template": template}}}]}}}}


def planned(runtime_name: str, *patches: dict, rt: dict | None = None, **trainer):
    job = trainjob(runtime_name, numNodes=2, **trainer)
    job.spec["runtimePatches"] = list(patches)
    return plan(job, rt or runtime(runtime_name))


def launcher_runtime() -> dict:
    """deepspeed-distributed with a sidecar and an init container in the launcher's pod to patch."""
    rt = runtime("deepspeed-distributed")
    launcher = rt["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    launcher["initContainers"] = [{"name": "wait", "image": "busybox", "env": [{"name": "A", "value": "1"}],
                                   "volumeMounts": [{"name": "x", "mountPath": "/x"}]}]
    launcher["containers"].append({"name": "sidecar", "image": "busybox", "securityContext": {"runAsUser": 1}})
    launcher["nodeSelector"] = {"zone": "a"}
    return rt


def test_each_pod_spec_field_reaches_the_named_replicated_jobs_pods_only():
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "d"}}
    job_plan = planned("deepspeed-distributed", patch(
        "launcher", metadata={"labels": {"team": "ml"}, "annotations": {"note": "n"}},
        volumes=[volume], imagePullSecrets=[{"name": "pull"}], schedulingGates=[{"name": "gate"}],
        nodeSelector={"gpu": "h200"}, tolerations=[{"key": "k", "operator": "Exists"}],
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
        securityContext={"fsGroup": 2}, serviceAccountName="trainer", terminationGracePeriodSeconds=5,
        initContainers=[{"name": "wait", "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}],
                         "volumeMounts": [{"name": "data", "mountPath": "/x"}]}],
        containers=[{"name": "sidecar", "env": [{"name": "C", "value": "4"}],
                     "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
                     "securityContext": {"runAsGroup": 3}},
                    {"name": "node", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]),
        rt=launcher_runtime())
    launcher = job_plan.pod("launcher", 0)
    spec = launcher.spec
    assert volume in spec["volumes"] and len(spec["volumes"]) > 1  # beside the MPI plugin's ssh keys and hostfile
    assert spec["imagePullSecrets"] == [{"name": "pull"}] and spec["schedulingGates"] == [{"name": "gate"}]
    assert spec["nodeSelector"] == {"zone": "a", "gpu": "h200"}  # merged key by key
    assert spec["tolerations"] == [{"key": "k", "operator": "Exists"}] and spec["serviceAccountName"] == "trainer"
    assert spec["affinity"]["nodeAffinity"] and spec["securityContext"] == {"fsGroup": 2}
    assert spec["terminationGracePeriodSeconds"] == 5
    assert (launcher.labels["team"], launcher.annotations["note"]) == ("ml", "n")
    assert job_plan.templates["launcher"]["metadata"]["labels"]["team"] == "ml"
    wait = spec["initContainers"][0]
    # env merged by name (A replaced where it stands), volumeMounts by mountPath (/x now the claim)
    assert [(e["name"], e.get("value")) for e in wait["env"]][:2] == [("A", "2"), ("B", "3")]
    assert wait["volumeMounts"] == [{"name": "data", "mountPath": "/x"}]
    sidecar = launcher.container("sidecar")
    assert {"name": "C", "value": "4"} in sidecar["env"]
    assert sidecar["volumeMounts"] == [{"name": "data", "mountPath": "/data", "readOnly": True}]
    assert sidecar["securityContext"] == {"runAsUser": 1, "runAsGroup": 3}  # field by field
    assert {"name": "data", "mountPath": "/data"} in launcher.container("node")["volumeMounts"]
    node = job_plan.pod("node", 0)  # the other replicatedJob: untouched
    assert volume not in node.spec.get("volumes", []) and "team" not in node.labels
    assert "nodeSelector" not in node.spec and "serviceAccountName" not in node.spec
    assert all(m.get("name") != "data" for m in node.container("node").get("volumeMounts", []))


def test_patches_apply_in_order_and_leave_the_runtime_as_written():
    rt = runtime("torch-distributed")
    before = repr(rt)
    job_plan = planned("torch-distributed", patch("node", nodeSelector={"a": "1"}, serviceAccountName="first"),
                       patch("node", manager="kueue.x-k8s.io/manager", nodeSelector={"b": "2"},
                             serviceAccountName="second"), rt=rt)
    for pod in job_plan.pods_of("node"):
        assert pod.spec["nodeSelector"] == {"a": "1", "b": "2"} and pod.spec["serviceAccountName"] == "second"
    assert repr(rt) == before


@pytest.mark.parametrize(("bad", "message"), [
    (patch("trainer"), r"spec.runtimePatches\[0\] \(manager 'example.com/m'\): the runtime has no replicatedJob "
                       r"'trainer': patch one of 'node'"),
    (patch("node", containers=[{"name": "sidecar"}]), r"replicatedJob 'node', containers: the runtime's pod has no "
                                                      r"container 'sidecar'"),
    (patch("node", initContainers=[{"name": "init"}]), "initContainers: the runtime's pod has no container 'init'"),
    (patch("node", containers=[{"name": "node", "env": [{"name": "X", "value": "1"}]}]),
     "env of container 'node' cannot be patched: set it in the TrainJob's trainer.env"),
])
def test_what_upstreams_admission_refuses_is_one_line(bad, message):
    with pytest.raises(UserError, match=message) as refused:
        planned("torch-distributed", bad)
    assert "\n" not in str(refused.value)
