"""Bad input of every kind: exit 2, one line on stderr naming the culprit, no traceback, nothing created."""

import pytest

from tests.conftest import REPO

GOOD_JOB = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ok}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template: {spec: {containers: [{name: pytorch, image: img, command: [python]}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: pytorch, image: img}]}}
"""


def variant(old: str, new: str) -> str:
    assert old in GOOD_JOB
    return GOOD_JOB.replace(old, new)


SUBMIT_CASES = [
    # (arguments, text the message must contain)
    (["submit", "pytorc", "--", "x"], "unknown job kind 'pytorc'"),
    (["submit", "pytorch", "--workers", "0", "--", "x"], "--workers 0"),
    (["submit", "pytorch", "--workers", "-3", "--", "x"], "--workers -3"),
    (["submit", "pytorch", "--workers", "many", "--", "x"], "--workers"),
    (["submit", "pytorch", "--name", "Bad_Name", "--", "x"], "metadata.name"),
    (["submit", "pytorch", "--name", "-lead", "--", "x"], "metadata.name"),
    (["submit", "pytorch", "--name", "x" * 60, "--", "x"], "too long"),
    (["submit", "pytorch"], "missing command"),
    (["submit", "pytorch", "-e", "NOEQUALS", "--", "x"], "--env 'NOEQUALS'"),
    (["submit", "pytorch", "-e", "1BAD=x", "--", "x"], "--env '1BAD'"),
    (["submit", "pytorch", "-e", "=x", "--", "x"], "--env"),
    (["submit", "pytorch", "--label", "team=a b", "--", "x"], "--label"),
    (["submit", "pytorch", "--label", "bad key=x", "--", "x"], "--label"),
    (["submit", "pytorch", "--annotation", "novalue", "--", "x"], "--annotation"),
    (["submit", "pytorch", "--volume", "nfs:/a:/b", "--", "x"], "--volume"),
    (["submit", "pytorch", "--volume", "pvc:data:relative", "--", "x"], "--volume"),
    (["submit", "pytorch", "--toleration", "key:Sometimes", "--", "x"], "--toleration"),
    (["submit", "pytorch", "--restart-policy", "Sometimes", "--", "x"], "--restart-policy"),
    (["submit", "pytorch", "--clean-pod-policy", "Some", "--", "x"], "--clean-pod-policy"),
    (["submit", "pytorch", "--cpu", "lots", "--", "x"], "--cpu 'lots'"),
    (["submit", "pytorch", "--memory", "4GB", "--", "x"], "--memory '4GB'"),
    (["submit", "pytorch", "--shm-size", "big", "--", "x"], "--shm-size"),
    (["submit", "pytorch", "--backoff-limit", "-1", "--", "x"], "--backoff-limit"),
    (["submit", "pytorch", "--active-deadline", "0", "--", "x"], "--active-deadline"),
    (["submit", "pytorch", "--ps", "1", "--", "x"], "--ps applies to tensorflow"),
    (["submit", "tf", "--chief", "2", "--", "x"], "--chief"),
    (["submit", "jax", "--slots-per-worker", "2", "--", "x"], "--slots-per-worker"),
    (["submit", "mpi", "--nproc-per-node", "2", "--", "x"], "--nproc-per-node"),
    (["submit", "pytorch", "--set", "spec..x=1", "--", "x"], "--set"),
    (["submit", "pytorch", "--set", "noequals", "--", "x"], "--set"),
    (["submit", "pytorch", "--set", "spec.pytorchReplicaSpecs.Worker.replicas=0", "--", "x"], "replicas: must be at least 1"),
    (["submit", "pytorch", "--set", "spec.pytorchReplicaSpecs.Worker.replicas=two", "--", "x"], "must be an integer"),
    (["submit", "pytorch", "--set", "spec.bogus=1", "--", "x"], "spec.bogus: unknown field"),
    (["submit", "pytorch", "--set", "spec.runPolicy.cleanPodPolicy=Sometimes", "--", "x"], "cleanPodPolicy"),
    (["submit", "pytorch", "--template", "/nonexistent.j2", "--", "x"], "--template"),
    (["submit", "pytorch", "--no-such-flag", "--", "x"], "No such option"),
    (["submit", "pytorch", "-f", "/nonexistent.yaml", "--", "x"], "/nonexistent.yaml"),
    (["status", "nosuchjob"], 'job "nosuchjob" not found'),
    (["logs", "nosuchjob"], 'job "nosuchjob" not found'),
    (["delete", "nosuchjob"], 'job "nosuchjob" not found'),
    (["wait", "nosuchjob", "--timeout", "soon"], "--timeout 'soon'"),
    (["completion", "tcsh"], "unsupported shell"),
    (["crds", "print", "caffe"], "unknown job kind"),
    (["status", "x", "-o", "xml"], "unknown output format"),
    (["nosuchcommand"], "No such command"),
    (["delete"], "name the jobs, or use --all"),
    (["delete", "a", "--all"], "name the jobs, or use --all"),
    (["delete", "a", "-l", "team=x"], "-l/--selector works with --all"),
]

APPLY_CASES = [
    ("broken: [yaml", "not valid YAML"),
    ("", "no job in the file"),
    ("- a list\n", "expected a kubeflow.org/v1 job mapping"),
    (variant("kubeflow.org/v1", "kubeflow.org/v2"), "apiVersion"),
    (variant("PyTorchJob", "CaffeJob"), "unsupported kind 'CaffeJob'"),
    (variant("name: ok", "name: Not_OK"), "metadata.name"),
    (variant("    Worker:\n      replicas: 2", "    Worker:\n      replicas: 0"), "Worker.replicas: must be at least 1"),
    (variant("    Worker:\n      replicas: 2", "    Worker:\n      replicas: -1"), "Worker.replicas: must be at least 1"),
    (variant("    Worker:\n      replicas: 2", "    Worker:\n      replicas: '2'"), "Worker.replicas: must be an integer"),
    (variant("    Worker:", "    Chief:"), "Chief: unsupported replica type"),
    (variant("    Worker:", "    worker:"), "write 'Worker'"),
    (variant("    Master:\n      replicas: 1", "    Master:\n      replicas: 2"), "Master.replicas: must be 1"),
    (variant("name: pytorch, image: img}", "name: torch, image: img}"), "must have a container named 'pytorch'"),
    (variant("image: img}", "image: ''}"), "image: required"),
    (variant("replicas: 1\n", "replicas: 1\n      bogus: 1\n"), "Master.bogus: unknown field"),
    (variant("{spec: {containers", "{spec: {nodeSelectr: {}, containers"), "nodeSelectr: unknown field"),
    (variant("command: [python]", "command: python"), "command: must be a list"),
    (variant("command: [python]", "env: [{name: '1X', value: a}]"), "env[0].name"),
    (variant("command: [python]", "env: [{name: A, value: 1}]"), "env[0].value: must be a string"),
    (variant("command: [python]", "resources: {limits: {cpu: lots}}"), "resources.limits.cpu"),
    (variant("replicas: 1\n", "replicas: 1\n      restartPolicy: Sometimes\n"), "restartPolicy: unsupported value"),
    (GOOD_JOB + "  runPolicy: {backoffLimit: -2}\n", "backoffLimit: must not be negative"),
    (GOOD_JOB + "  runPolicy: {managedBy: someone}\n", "managedBy"),
    (GOOD_JOB + "  runPolicy: {cleanPodPolicy: Everything}\n", "cleanPodPolicy: unsupported value"),
    ("apiVersion: kubeflow.org/v1\nkind: XGBoostJob\nmetadata: {name: x}\nspec:\n  xgbReplicaSpecs:\n"
     "    Worker: {template: {spec: {containers: [{name: xgboost, image: i}]}}}\n", "Master: must be present"),
    ("apiVersion: kubeflow.org/v1\nkind: MPIJob\nmetadata: {name: x}\nspec:\n  mpiReplicaSpecs:\n"
     "    Worker: {template: {spec: {containers: [{name: w, image: i}]}}}\n", "Launcher: must be present"),
    ("apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: x}\nspec:\n  tfReplicaSpecs: {}\n", "must list at least one"),
    (GOOD_JOB + "---\n" + variant("name: ok", "name: BAD"), "document 2"),
]


def assert_one_line_error(result, expected):
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert expected in lines[0], lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, expected", SUBMIT_CASES, ids=[" ".join(c[0])[:60] for c in SUBMIT_CASES])
def test_bad_command_line(cli, args, expected):
    dry = ["--dry-run"] if args[0] == "submit" and "--" in args else []
    args = args[:2] + dry + args[2:] if dry else args
    assert_one_line_error(cli(*args), expected)


@pytest.mark.parametrize("text, expected", APPLY_CASES, ids=[c[1][:40] for c in APPLY_CASES])
def test_bad_yaml(cli, text, expected):
    assert_one_line_error(cli("apply", "-f", "-", "--dry-run", input=text), expected)


def test_bad_yaml_creates_nothing(cli):
    text = GOOD_JOB + "---\n" + variant("name: ok", "name: Bad")
    assert_one_line_error(cli("apply", "-f", "-", input=text), "document 2")
    assert cli("list").stdout.startswith("no jobs")


def test_submitting_a_job_that_exists_is_refused(cli):
    script = cli.cwd / "ok.py"
    script.write_text("pass\n")
    assert cli("submit", "jax", "--name", "twice", "--", "python", str(script)).returncode == 0
    assert_one_line_error(cli("submit", "jax", "--name", "twice", "--", "python", str(script)), "already exists")
    assert cli("delete", "twice").returncode == 0


def test_too_many_gpus_is_a_clear_error(cli):
    cli.env["CUDA_VISIBLE_DEVICES"] = "0"
    assert_one_line_error(cli("submit", "pytorch", "--workers", "2", "--gpus", "1", "--", "python", "x.py"),
                          "asks for 2 GPUs")
    assert cli("list").stdout.startswith("no jobs")


def test_there_are_at_least_thirty_cases():
    assert len(SUBMIT_CASES) + len(APPLY_CASES) >= 30
    assert (REPO / "tests" / "unit" / "test_bad_input.py").is_file()
