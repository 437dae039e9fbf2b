"""The local backend runs a TrainJob runtime's steps as JobSet would (trainctl/core/trainjob.py): a step that
``dependsOn`` another starts once that one is Complete, a step whose container is not named ``node`` runs, and a
pod template's ``restartPolicy: Never`` gets new runs up to the Job's backoffLimit. And a supervisor that stops on
an error of trainctl's own says so in the job's status, not as a supervisor lost."""

from __future__ import annotations

import json
import re

import yaml

from trainctl.backends.local.backend import LocalBackend

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"

# the initializer writes the dataset a moment after it starts; the trainer, started before it is Complete, would not
# find it: usage error, exit 2, which fails the job for good
INITIALIZE = "import os, time; time.sleep(1.5); open('dataset.txt', 'w').write(os.environ['STORAGE_URI'])"
TRAIN = ("import os, sys\nif not os.path.exists('dataset.txt'): sys.exit(2)\n"
         "print('TRAINED ON', open('dataset.txt').read(), os.environ['JOB_COMPLETION_INDEX'], flush=True)")


def step(name: str, ancestor: str, container: str, command: list[str] | None = None, **extra) -> dict:
    spec = {"containers": [{"name": container, "image": "python", **({"command": command} if command else {})}]}
    return {"name": name, **extra, "template": {"metadata": {"labels": {ANCESTOR: ancestor}},
                                                "spec": {"template": {"spec": spec}}}}


def job_file(name: str, replicated_jobs: list[dict], **spec) -> str:
    runtime = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": name},
               "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {
                   "replicatedJobs": replicated_jobs}}}}
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
           "spec": {"runtimeRef": {"kind": "TrainingRuntime", "name": name}, **spec}}
    return yaml.safe_dump_all([job, runtime])


def run(cli, name: str, text: str) -> str:
    (cli.cwd / f"{name}.yaml").write_text(text)
    applied = cli("apply", "-f", f"{name}.yaml")
    assert applied.returncode == 0, applied.stderr
    waited = cli("wait", name, "--timeout", "60", timeout=80)
    status = cli("status", name).stdout
    assert waited.returncode == 0, status + cli("logs", name).stdout
    return status


def assert_row(replica: str, state: str, restarts: int, status: str) -> None:
    """``status`` shows the replica in that state after that many restarts."""
    assert re.search(rf"^{replica}\s+{state}\s+{restarts}\s", status, re.MULTILINE), status


def test_a_trainer_step_starts_once_the_dataset_initializer_it_depends_on_is_complete(cli):
    """Upstream's 05-multi-step: dataset-initializer, then the trainer (dependsOn: Complete). The initializer's
    container is named like its step, not node: it runs, with the TrainJob's storageUri as STORAGE_URI."""
    steps = [step("dataset-initializer", "dataset-initializer", "dataset-initializer", ["python3", "-c", INITIALIZE]),
             step("node", "trainer", "node", dependsOn=[{"name": "dataset-initializer", "status": "Complete"}])]
    status = run(cli, "multi", job_file("multi", steps, initializer={"dataset": {"storageUri": "hf://tatsu-lab/x"}},
                                        trainer={"command": ["python3", "-c", TRAIN]}))
    assert_row("multi-dataset-initializer-0-0", "Succeeded", 0, status)
    assert_row("multi-node-0-0", "Succeeded", 0, status)  # started once: after the dataset was there
    assert "node-0-0 | TRAINED ON hf://tatsu-lab/x 0" in cli("logs", "multi").stdout


def test_a_trainer_step_whose_container_is_named_trainer_runs_as_the_runtime_writes_it(cli):
    """Upstream gives the TrainJob's trainer only to a container named node: one named trainer runs its own
    command, with the env the plan gives its pod."""
    command = ["python3", "-c", "import os; print('STEP', os.environ['JOB_COMPLETION_INDEX'], "
                                "os.environ.get('FOO_55', '-'))"]
    steps = [step("node", "trainer", "trainer", command)]
    run(cli, "own", job_file("own", steps, trainer={"command": ["false"], "env": [{"name": "FOO_55", "value": "x"}]}))
    supervisor_log = (cli.home / "jobs" / "default" / "own" / "supervisor.log").read_text()
    assert "Traceback" not in supervisor_log, supervisor_log
    # neither the TrainJob's command nor its env: they go to a container named node only (upstream's jobset builder)
    assert "node-0-0 | STEP 0 -" in cli("logs", "own").stdout


def test_restart_policy_never_gets_a_new_run_up_to_the_backoff_limit(cli):
    """A Job of restartPolicy Never makes a new pod for a failed one, up to its backoffLimit: a step that fails once
    (no marker yet) then succeeds ends Succeeded under backoffLimit 1."""
    flaky = ("import os, sys\nif not os.path.exists('tried'):\n    open('tried', 'w').close(); sys.exit(1)\n"
             "print('SECOND RUN', flush=True)")
    node = step("node", "trainer", "node", ["python3", "-c", flaky])
    node["template"]["spec"]["backoffLimit"] = 1
    node["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    status = run(cli, "never", job_file("never", [node]))
    assert_row("never-node-0-0", "Succeeded", 1, status)
    assert "node-0-0 | SECOND RUN" in cli("logs", "never").stdout


def test_a_supervisor_stopped_by_an_error_of_its_own_fails_the_job_naming_it(cli, monkeypatch):
    """Below validation (a job written by hand, a bug): the pass raises; the job is Failed with the error and where
    the traceback is, never a bare 'supervisor lost' after the job was accepted."""
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.chdir(cli.cwd)
    container = {"name": "pytorch", "image": "python", "command": ["python3", "-c", "import time; time.sleep(60)"]}
    LocalBackend().create({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bug"},
                           "spec": {"runPolicy": {"activeDeadlineSeconds": "soon"}, "pytorchReplicaSpecs": {
                               "Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}}}}},
                          preflight=False)
    assert cli("wait", "bug", "--for", "Failed", "--timeout", "30").returncode == 0
    failed = next(c for c in json.loads(cli("status", "bug", "-o", "json").stdout)["status"]["conditions"]
                  if c["type"] == "Failed")
    assert failed["reason"] == "PyTorchJobSupervisorFailed", failed
    assert "internal error (TypeError: " in failed["message"] and "supervisor.log" in failed["message"], failed
    assert "Traceback" in (cli.home / "jobs" / "default" / "bug" / "supervisor.log").read_text()
