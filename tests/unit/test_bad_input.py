"""Bad input of every kind: exit 2, one line on stderr naming the culprit, no traceback, nothing created."""

import datetime
import json
import subprocess
import sys

import pytest
import yaml

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
    (["submit", "pytorch", "--checkpoints", "host:/etc", "--", "x"],
     "--checkpoints 'host:/etc': /etc is a system directory of the node"),
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
    (["crds", "print", "--api", "v3"], "unknown API 'v3' for --api: use v1, v2 or all"),
    # Trainer v2's runtimes: --image RUNTIME=IMAGE, checked before any cluster is asked
    (["runtimes", "print", "--image", "torch-distributed"], "--image 'torch-distributed': write RUNTIME=IMAGE"),
    (["runtimes", "print", "--image", "torch-distributd=registry.local/x:1"], "did you mean torch-distributed?"),
    (["runtimes", "install", "--image", "jax-distributed=Not An Image"], "'Not An Image' is not an image reference"),
    (["runtimes", "install", "--image", "jax-distributed=a:1", "--image", "jax-distributed=b:1"], "given twice"),
    (["runtimes", "print", "--image", "mlx-distributed=x@sha256:abc"], "is not an image reference"),
    (["runtimes", "print", "torch"], "no default runtime 'torch'"),
    (["status", "x", "-o", "xml"], "unknown output format"),
    (["nosuchcommand"], "No such command"),
    (["delete"], "name the jobs, or use --all"),
    (["delete", "a", "--all"], "name the jobs, or use --all"),
    (["delete", "a", "-l", "team=x"], "-l/--selector works with --all"),
    # issue 13 class 1: a namespace is a DNS-1123 label on every command that takes one
    (["submit", "pytorch", "-n", "../../escape-dir", "--", "x"], "-n/--namespace '../../escape-dir'"),
    (["submit", "pytorch", "-n", "[red]x", "--", "x"], "not a valid namespace"),
    (["submit", "pytorch", "-n", "", "--", "x"], "not a valid namespace"),
    (["status", "x", "-n", "a\nb"], "not a valid namespace"),
    (["logs", "x", "-n", "../x"], "not a valid namespace"),
    (["delete", "x", "-n", "UPPER"], "not a valid namespace"),
    (["list", "-n", "x/y"], "not a valid namespace"),
    (["wait", "x", "-n", "-x-"], "not a valid namespace"),
    (["suspend", "x", "-n", "." * 3], "not a valid namespace"),
    (["resume", "x", "-n", "n" * 64], "not a valid namespace"),
    (["apply", "-f", "-", "-n", "../x"], "not a valid namespace"),
    (["controller", "run", "-n", "default", "-n", "../x"], "-n/--namespace '../x': not a valid namespace"),
    # class 4: values JSON cannot carry
    (["submit", "pytorch", "--set", "metadata.annotations.day=2024-01-01", "--", "x"], "a timestamp (2024-01-01)"),
    (["submit", "pytorch", "--set", "metadata.annotations.b=!!binary aGk=", "--", "x"], "!!binary"),
    (["submit", "pytorch", "--set", "metadata.annotations.s=!!set {a}", "--", "x"], "!!set"),
    (["submit", "pytorch", "--set", "spec.runPolicy.backoffLimit=.nan", "--", "x"], "not a JSON number"),
    # class 5: sizes
    (["submit", "pytorch", "--set", "spec.runPolicy.backoffLimit=" + "9" * 5000, "--", "x"], "5000 digits"),
    (["submit", "pytorch", "--set", "metadata.annotations.a=" + "[" * 330 + "]" * 330, "--", "x"], "nested deeper"),
    (["submit", "pytorch", "--set", "metadata.x=*nowhere", "--", "x"], "alias *nowhere"),
    (["submit", "pytorch", *["-e", "A=1"] * 1001, "--", "x"], "--env: 1,001 entries is more than 1,000"),
    # class 7: the CRD's integer formats, whole GPUs
    (["submit", "pytorch", "--active-deadline", "9223372036854775808", "--", "x"], "--active-deadline"),
    (["submit", "pytorch", "--ttl-after-finished", "2147483648", "--", "x"], "at most 2147483647"),
    (["submit", "pytorch", "--backoff-limit", "3000000000", "--", "x"], "--backoff-limit"),
    (["submit", "pytorch", "--workers", "2147483648", "--", "x"], "--workers"),
    (["submit", "pytorch", "--set", "spec.runPolicy.backoffLimit=2147483648", "--", "x"], "the field is an int32"),
    (["submit", "pytorch", "--set", "spec.runPolicy.activeDeadlineSeconds=9223372036854775808", "--", "x"],
     "outside the int64 range"),
    (["submit", "pytorch", "--set", "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]"
      '.resources.limits["nvidia.com/gpu"]=500m', "--", "x"], "'500m' is not a whole number"),
    (["submit", "pytorch", "--cpu", "-1", "--", "x"], "--cpu '-1'"),
    # class 11
    (["submit", "pytorch", "--name", "", "--", "x"], "--name '': empty"),
    (["submit", "pytorch", "--image", "", "--", "x"], "--image '': empty"),  # found by tests/fuzz
    (["submit", "pytorch", "--priority-class", "", "--", "x"], "--priority-class '': empty"),
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
    # issue 13 class 1: the file's own namespace
    (variant("name: ok}", "name: ok, namespace: ../../escape}"), "metadata.namespace: '../../escape' is not a valid"),
    (variant("name: ok}", "name: ok, namespace: '[red]x'}"), "metadata.namespace"),
    # class 4: YAML types that are not JSON, anywhere (metadata keeps unknown fields)
    (variant("name: ok}", "name: ok, created: 2024-01-01}"), "a timestamp (2024-01-01) is not a JSON value"),
    (variant("name: ok}", "name: ok, labels: {at: 2024-01-01 10:00:00}}"), "a timestamp"),
    (variant("name: ok}", "name: ok, blob: !!binary aGVsbG8=}"), "!!binary data"),
    (variant("name: ok}", "name: ok, tags: !!set {a, b}}"), "!!set"),
    (variant("name: ok}", "name: ok, pairs: !!omap [a: 1]}"), "!!omap"),
    (variant("replicas: 2", "replicas: .inf"), ".inf is not a JSON number"),
    (variant("name: ok}", "name: ok, 1: x}"), "keys must be strings"),
    # class 5: aliases, depth, integer size
    ("a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n"
                                             for i in range(9)), "once aliases are expanded"),
    ("a: &a [*a]\n", "alias *a at line 1 refers to no complete anchor"),
    ("a: " + "[" * 330 + "]" * 330 + "\n", "nested deeper than 64 levels"),
    ("a: " + "{b: " * 100000, "nested deeper than 64 levels"),
    (variant("replicas: 2", "replicas: " + "9" * 4301), "an integer of 4301 digits is too large"),
    (variant("replicas: 2", "replicas: " + "9" * 100), "outside the int64 range"),
    # class 7: the CRD's formats, whole GPUs, no negative quantities
    (variant("replicas: 2", "replicas: 2147483648"), "Worker.replicas: 2147483648 is out of range"),
    (GOOD_JOB + "  runPolicy: {ttlSecondsAfterFinished: 2147483648}\n", "the field is an int32"),
    (GOOD_JOB + "  runPolicy: {activeDeadlineSeconds: 9223372036854775808}\n", "outside the int64 range"),
    (variant("command: [python]", "resources: {limits: {nvidia.com/gpu: 500m}}"), "'500m' is not a whole number"),
    (variant("command: [python]", "resources: {limits: {nvidia.com/gpu: '1.5'}}"), "'1.5' is not a whole number"),
    (variant("command: [python]", "resources: {requests: {memory: -1Gi}}"), "not a quantity of at least 0"),
    (variant("{spec: {containers", "{spec: {nodeSelector: {disk: a b}, containers"), "nodeSelector.disk: 'a b'"),
    (variant("{spec: {containers", "{spec: {tolerations: [{key: gpu, effect: Sometimes}], containers"),
     "tolerations[0].effect: unsupported value 'Sometimes'"),
    (variant("{spec: {containers", "{spec: {tolerations: [{operator: Equal, value: x}], containers"),
     "must be Exists when the key is empty"),
]


def assert_one_line_error(result, expected):
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert expected in lines[0], lines[0]
    assert "Traceback" not in result.stderr


def command_line_refused(cli, args, expected):
    dry = ["--dry-run"] if args[0] == "submit" and "--" in args else []
    args = args[:2] + dry + args[2:] if dry else args
    assert_one_line_error(cli(*args), expected)


def yaml_refused(cli, text, expected):
    assert_one_line_error(cli("apply", "-f", "-", "--dry-run", input=text), expected)


@pytest.mark.parametrize("args, expected", SUBMIT_CASES, ids=[" ".join(c[0])[:60] for c in SUBMIT_CASES])
def test_bad_command_line(cli, args, expected):
    command_line_refused(cli, args, expected)


@pytest.mark.parametrize("text, expected", APPLY_CASES, ids=[c[1][:40] for c in APPLY_CASES])
def test_bad_yaml(cli, text, expected):
    yaml_refused(cli, text, expected)


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
    (cli.cwd / "x.py").write_text("pass\n")  # so that the script's preflight passes and the GPU check speaks
    assert_one_line_error(cli("submit", "pytorch", "--workers", "2", "--gpus", "1", "--", "python", "x.py"),
                          "asks for 2 GPUs")
    assert cli("list").stdout.startswith("no jobs")


def test_there_are_at_least_thirty_cases():
    assert len(SUBMIT_CASES) + len(APPLY_CASES) >= 30
    assert (REPO / "tests" / "unit" / "test_bad_input.py").is_file()


# ---- issue 13: files, encodings, sizes, exact values, the Python API --------------------------

def test_files_that_are_not_utf8_name_the_byte(cli):
    latin1 = cli.cwd / "latin1.yaml"
    latin1.write_bytes("name: café\n".encode("latin-1"))
    expected = "not UTF-8 (byte 0xe9 at offset 9): save it as UTF-8"
    assert_one_line_error(cli("submit", "pytorch", "--dry-run", "-f", str(latin1), "--", "x"), expected)
    assert_one_line_error(cli("apply", "--dry-run", "-f", str(latin1)), expected)


def test_a_template_that_is_not_utf8_names_the_byte(cli):
    template = cli.cwd / "latin1.yaml.j2"
    template.write_bytes("# café\n".encode("latin-1"))
    assert_one_line_error(cli("submit", "pytorch", "--dry-run", "--template", str(template), "--", "x"),
                          "not UTF-8 (byte 0xe9 at offset 5): save it as UTF-8")


def test_utf16_with_a_bom_is_read_as_the_yaml_spec_asks(cli):
    job = cli.cwd / "utf16.yaml"
    runnable = GOOD_JOB.replace("image: img}]", "image: img, command: [python]}]")  # apply --dry-run checks it can start
    job.write_bytes(runnable.replace("name: ok", "name: ok, annotations: {note: café}").encode("utf-16"))
    result = cli("apply", "--dry-run", "-o", "json", "-f", str(job))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["metadata"]["annotations"] == {"note": "café"}


@pytest.mark.parametrize("args", [["submit", "pytorch", "--dry-run", "-f", "/dev/zero", "--", "x"],
                                  ["apply", "--dry-run", "-f", "/dev/zero"]])
def test_endless_files_are_cut_off(cli, args):
    assert_one_line_error(cli(*args, timeout=30), "-f /dev/zero: larger than 4 MiB")


def test_oversized_stdin_is_cut_off(cli):
    assert_one_line_error(cli("apply", "--dry-run", "-f", "-", input="#" * (5 * 2**20)), "-f -: larger than 4 MiB")


def test_values_file_with_twenty_thousand_env_entries(cli):
    values = cli.cwd / "values.yaml"
    values.write_text("env:\n" + "".join(f"  - K{i}=v\n" for i in range(20_000)))
    assert_one_line_error(cli("submit", "pytorch", "-f", str(values), "--", "x", timeout=30),
                          "--env: 20,000 entries is more than 1,000")
    assert cli("list").stdout.startswith("no jobs")


def test_billion_laughs_in_a_values_file(cli):
    values = cli.cwd / "values.yaml"
    values.write_text("a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9)) + "env: *j\n")
    assert_one_line_error(cli("submit", "pytorch", "--dry-run", "-f", str(values), "--", "x", timeout=30),
                          "once aliases are expanded")


@pytest.mark.parametrize("args, culprit", [
    ([b"-e", b"A=x\xffy"], "-e: b'A=x\\xffy' is not valid UTF-8 (byte 0xff at offset 3)"),
    ([b"--name=\xfe"], "--name: b'--name=\\xfe' is not valid UTF-8"),
    ([b"--", b"python", b"caf\xe9"], "argument 2 of the command after --: b'caf\\xe9'"),
])
def test_arguments_that_are_not_utf8_are_blamed_on_their_option(cli, args, culprit):
    result = subprocess.run([sys.executable, "-m", "trainctl", "submit", "pytorch", "--dry-run", *args],
                            cwd=cli.cwd, env=cli.env, capture_output=True, text=True, timeout=120)
    assert_one_line_error(result, culprit)


YAML_BREAKS = "a\x85b\u2028c\u2029d\x7fe\ufefff\x9fg"  # YAML line breaks, DEL, BOM, a C1 control


def test_yaml_line_breaks_in_values_survive_exactly(cli):
    result = cli("submit", "jax", "--name", "exact", "--dry-run", "--no-preflight", "-o", "json", "-e", f"V={YAML_BREAKS}",
                 "--annotation", f"note={YAML_BREAKS}", "--", "python", YAML_BREAKS)
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    container = job["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "V", "value": YAML_BREAKS}]
    assert container["command"] == ["python", YAML_BREAKS]
    assert job["metadata"]["annotations"] == {"note": YAML_BREAKS}


def test_yaml_line_breaks_reach_the_process_exactly(cli):
    """Through the local backend to a real process: the environment and argv hold the same characters."""
    code = "import os, sys; print('got', ascii(os.environ['V']), ascii(sys.argv[1]))"
    result = cli("submit", "jax", "--name", "exact", "-e", f"V={YAML_BREAKS}", "--wait", "--",
                 "python", "-c", code, YAML_BREAKS)
    assert result.returncode == 0, result.stderr
    logs = cli("logs", "exact").stdout
    assert f"got {ascii(YAML_BREAKS)} {ascii(YAML_BREAKS)}" in logs, logs
    assert cli("delete", "exact").returncode == 0


def test_a_namespace_that_escapes_writes_nothing(cli):
    script = cli.cwd / "ok.py"
    script.write_text("pass\n")
    before = sorted(cli.cwd.parent.rglob("*"))
    assert_one_line_error(cli("submit", "jax", "-n", "../../escape-dir", "--", "python", str(script)),
                          "not a valid namespace")
    assert sorted(cli.cwd.parent.rglob("*")) == before


def test_the_python_api_refuses_what_the_cli_refuses(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINCTL_HOME", str(tmp_path / "home"))
    from trainctl.errors import UserError
    from trainctl.sdk.client import Client

    client = Client(backend="local")

    def job(**metadata):
        resource = yaml.safe_load(GOOD_JOB)
        resource["metadata"].update(metadata)
        return resource

    with pytest.raises(UserError, match=r"metadata.namespace: '\.\./x' is not a valid namespace"):
        client.submit(job(namespace="../x"))
    with pytest.raises(UserError, match="namespace '../x': not a valid namespace"):
        client.get("ok", namespace="../x")
    with pytest.raises(UserError, match=r"metadata.labels.day: date datetime.date\(2024, 1, 1\) is not a JSON value"):
        client.submit(job(labels={"day": datetime.date(2024, 1, 1)}))
    with pytest.raises(UserError, match="not valid Unicode"):
        client.submit(job(annotations={"a": "x\udcff"}))
    cyclic = job()
    cyclic["metadata"]["annotations"] = {"self": cyclic}
    with pytest.raises(UserError, match="nested deeper than 64 levels"):
        client.submit(cyclic)
    shared: list = []
    for _ in range(60):  # 2**60 values when walked naively
        shared = [shared, shared]
    with pytest.raises(UserError, match="more than 100,000 values"):
        client.submit(job(annotations_list=shared))
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*.json"))
