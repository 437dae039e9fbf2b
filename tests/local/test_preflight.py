"""The local backend refuses, before anything exists, a job whose command cannot start here.

The mistakes a newcomer makes in the first hour (a typo in the script's name, a tool that is
not installed, a cluster-only volume) are one line on stderr, exit 2, no job; what would run
is never refused. Real CLI processes and a real local backend throughout.
"""

import json
import os
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from trainctl.backends.local import preflight
from trainctl.errors import UserError
from trainctl.sdk.client import Client

WHERE = "pytorchReplicaSpecs.Master"


def one_line_error(result, *expected: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def no_jobs(cli) -> bool:
    return cli("list").stdout.startswith("no jobs") and not list(cli.home.rglob("job.json"))


def test_follow_of_a_missing_script_ends_at_once_naming_it(cli):
    started = time.monotonic()
    result = cli("submit", "pytorch", "--workers", "2", "--follow", "--", "python", "missing.py", timeout=60)
    elapsed = time.monotonic() - started
    one_line_error(result, "missing.py", str(cli.cwd), "--no-preflight")
    assert elapsed < 5, elapsed  # the bound; a 2-core CI machine takes well under a second
    assert no_jobs(cli)


def test_a_command_not_on_path_is_named(cli):
    one_line_error(cli("submit", "pytorch", "--", "pyhton", "train.py"), "'pyhton'", "PATH")
    assert no_jobs(cli)


def test_a_failed_preflight_leaves_the_job_it_would_replace_alone(cli):
    (cli.cwd / "ok.py").write_text("import time; time.sleep(30)\n")
    assert cli("submit", "pytorch", "--name", "keep", "--", "python", "ok.py").returncode == 0
    one_line_error(cli("submit", "pytorch", "--name", "keep", "--replace", "--", "python", "gone.py"), "gone.py")
    status = json.loads(cli("status", "keep", "-o", "json").stdout)
    assert status["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"] == \
        ["python", "ok.py"]
    assert cli("delete", "keep").returncode == 0


def test_no_preflight_creates_the_job_and_its_usage_error_ends_it_at_once(cli):
    """python's exit 2 for a file it cannot open is a usage error: the job fails on its first run, spending none
    of its backoffLimit (issue 40; it used to run backoffLimit + 1 times, each ending the same way)."""
    result = cli("submit", "pytorch", "--name", "forced", "--workers", "1", "--backoff-limit", "1",
                 "--no-preflight", "--", "python", "missing.py")
    assert result.returncode == 0, result.stderr
    waited = cli("wait", "forced", "--timeout", "120", timeout=150)
    assert waited.returncode == 1, (waited.stdout, waited.stderr)
    assert "can't open file" in waited.stderr and "missing.py" in waited.stderr, waited.stderr
    status = json.loads(cli("status", "forced", "-o", "json").stdout)["status"]
    failed = [c for c in status["conditions"] if c["type"] == "Failed"]
    assert failed and "master-0 exited with code 2" in failed[0]["message"], failed
    assert not any(c["type"] == "Restarting" for c in status["conditions"]), status["conditions"]


def test_apply_checks_too_and_takes_no_preflight(cli):
    job = yaml.safe_load((REPO / "examples" / "jax" / "job.yaml").read_text())
    text = yaml.safe_dump(job)  # its script is relative to the repository root, not to cli.cwd
    one_line_error(cli("apply", "-f", "-", input=text), "examples/jax/train_distributed.py")
    assert no_jobs(cli)
    assert cli("apply", "-f", "-", "--no-preflight", input=text).returncode == 0
    assert cli("delete", "jax-distributed").returncode == 0


def test_the_python_api_checks_and_takes_a_keyword(cli, monkeypatch):
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.chdir(cli.cwd)
    rendered = cli("submit", "jax", "--name", "api", "--dry-run", "--no-preflight", "-o", "json", "--", "python",
                   "nope.py")
    resource = json.loads(rendered.stdout)
    client = Client(backend="local")
    with pytest.raises(UserError, match="nope.py"):
        client.submit(json.loads(rendered.stdout))
    assert client.list() == []
    assert client.submit(resource, preflight=False)["metadata"]["name"] == "api"
    client.delete("api")


# ---- which commands are checked, and how ---------------------------------------------------------

@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    for name in ("train.py", "run.sh"):
        (tmp_path / name).write_text("")
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    (tmp_path / "not-executable").write_text("")
    return tmp_path


PATH = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
RUNS = [
    ["python", "train.py"], ["python3", "-u", "train.py", "--epochs", "1"], ["python", "-W", "ignore", "train.py"],
    ["python", "-m", "no_such_module_is_checked"], ["python", "-c", "print(1)"], ["python", "-um", "pkg.mod"],
    [sys.executable, "train.py"], ["bash", "run.sh"], ["bash", "-c", "exit 0"], ["sh", "-e", "run.sh"],
    ["./bin/tool", "--flag"], ["bin/tool"], ["true"],
    ["python", "-m", "torch.distributed.run", "--nproc-per-node", "2", "missing-but-a-module-argument.py"],
    ["mpirun", "--allow-run-as-root", "-np", "2", "-x", "PYTHONPATH", "python", "train.py"],
    ["mpirun", "-np", "2", "./a.out"],
]
REFUSED = [
    (["python", "missing.py"], "no file missing.py"), (["python3", "-u", "missing.py"], "no file missing.py"),
    (["bash", "missing.sh"], "no file missing.sh"), (["./missing-tool"], "./missing-tool does not exist"),
    (["./not-executable"], "is not executable"), (["pyhton", "train.py"], "'pyhton' is not a command"),
    (["mpirun", "-np", "2", "--bind-to", "none", "python", "missing.py"], "no file missing.py"),
    (["torchrun", "--nproc-per-node", "2", "--standalone", "missing.py"], "no file missing.py"),
    (["torchrun", "--nproc_per_node=2", "missing.py"], "no file missing.py"),
]


def fake_launchers(workdir: Path) -> str:
    """torchrun and mpirun as this machine may not have them: the check asks only that they resolve."""
    for name in ("torchrun", "mpirun"):
        launcher = workdir / "bin" / name
        launcher.write_text("#!/bin/sh\n")
        launcher.chmod(0o755)
    return os.pathsep.join([str(workdir / "bin"), PATH])


@pytest.mark.parametrize("command", RUNS, ids=lambda c: " ".join(c)[:40])
def test_what_can_run_is_never_refused(workdir, command):
    preflight.check_command(command, str(workdir), fake_launchers(workdir), WHERE)


@pytest.mark.parametrize("command, expected", REFUSED, ids=lambda c: " ".join(c)[:40] if isinstance(c, list) else "")
def test_what_cannot_start_is_named(workdir, command, expected):
    with pytest.raises(UserError, match=expected.replace(".", r"\.")):
        preflight.check_command(command, str(workdir), fake_launchers(workdir), WHERE)


def test_a_replica_path_from_the_job_env_is_the_one_searched(workdir):
    container = {"env": [{"name": "PATH", "value": str(workdir / "bin")}]}
    preflight.check_command(["tool"], str(workdir), preflight.replica_path(container), WHERE)
    with pytest.raises(UserError, match="'tool'"):
        preflight.check_command(["tool"], str(workdir), preflight.replica_path({}), WHERE)


# ---- options the local backend cannot honour -----------------------------------------------------

def test_volumes_host_at_its_own_path_runs_others_are_refused(cli):
    data = cli.cwd / "data"
    data.mkdir()
    (data / "in.txt").write_text("42\n")
    (cli.cwd / "read.py").write_text(f"print(open({str(data / 'in.txt')!r}).read().strip())\n")
    one_line_error(cli("submit", "pytorch", "--volume", f"host:{data}:/mnt/data", "--", "python", "read.py"),
                   f"--volume host:{data}:{data}")
    one_line_error(cli("submit", "pytorch", "--volume", "pvc:claim:/data", "--", "python", "read.py"),
                   "PersistentVolumeClaim 'claim'")
    one_line_error(cli("submit", "pytorch", "--volume", "host:/no/such/dir:/no/such/dir", "--", "python", "read.py"),
                   "/no/such/dir does not exist")
    assert no_jobs(cli)
    result = cli("submit", "pytorch", "--name", "vol", "--workers", "1", "--volume", f"host:{data}:{data}:ro",
                 "--wait", "--", "python", "read.py", timeout=150)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert cli("logs", "vol").stdout.strip().endswith("42")


def test_submit_names_the_options_the_local_backend_does_not_enforce(cli):
    (cli.cwd / "ok.py").write_text("")
    result = cli("submit", "pytorch", "--name", "notes", "--cpu", "2", "--memory", "1Gi", "--gang",
                 "--node-selector", "pool=gpu", "--", "python", "ok.py")
    assert result.returncode == 0, result.stderr
    (note,) = [line for line in result.stdout.splitlines() if "does not enforce" in line]
    assert all(flag in note for flag in ("--cpu", "--memory", "--gang", "--node-selector")), note
    plain = cli("submit", "pytorch", "--name", "plain", "--", "python", "ok.py")
    assert plain.returncode == 0 and "does not enforce" not in plain.stdout


def test_a_job_held_for_kueue_is_refused_locally_and_leaves_nothing(cli):
    """Only a cluster has Kueue: locally the job would stay suspended forever."""
    one_line_error(cli("submit", "pytorch", "--local-queue", "team-a", "--", "python", "train.py"),
                   "kueue.x-k8s.io/queue-name=team-a", "Kubernetes only")
    assert no_jobs(cli)
    # the dry run makes the real submit's checks on the same backend: refused in the same words
    (cli.cwd / "train.py").write_text("")
    real = one_line_error(cli("submit", "pytorch", "--name", "q", "--local-queue", "team-a", "--", "python",
                              "train.py"), "Kubernetes only")
    dry = one_line_error(cli("submit", "pytorch", "--name", "q", "--local-queue", "team-a", "--dry-run", "--",
                             "python", "train.py"))
    assert dry == real and no_jobs(cli)


@pytest.mark.parametrize("args, expected", [
    (["--", "python", "/opt/nope.py"], "no file /opt/nope.py on this machine"),
    (["--", "pyhton", "train.py"], "'pyhton' is not a command"),
    (["--gpus", "1", "--", "python", "train.py"], "the job asks for 2 GPUs (nvidia.com/gpu per replica) but this "
                                                  "machine has 0"),
])
def test_a_dry_run_refuses_what_the_submit_refuses_in_the_same_words(cli, args, expected):
    """Issue 32's rule: a dry run makes every check the real one makes, on the same backend."""
    (cli.cwd / "train.py").write_text("")
    cli.env["CUDA_VISIBLE_DEVICES"] = ""  # this machine offers no GPU, whatever it has
    real = one_line_error(cli("submit", "pytorch", "--name", "same", *args), expected)
    for dry in (["--dry-run"], ["--dry-run", "-o", "yaml"]):
        assert one_line_error(cli("submit", "pytorch", "--name", "same", *dry, *args)) == real
    assert no_jobs(cli)


def test_a_python_dry_run_refuses_what_run_refuses(cli, monkeypatch):
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.chdir(cli.cwd)
    client = Client(backend="local")
    with pytest.raises(UserError, match="no file nope.py") as refused:
        client.run([sys.executable, "nope.py"], framework="jax", dry_run=True)
    with pytest.raises(UserError) as real:
        client.run([sys.executable, "nope.py"], framework="jax")
    assert str(refused.value) == str(real.value)
    with pytest.raises(UserError, match="waits for Kueue"):
        client.run([sys.executable, "-c", "pass"], local_queue="team-a", dry_run=True)
    resource = client.run([sys.executable, "nope.py"], framework="jax", name="unchecked", dry_run=True,
                          preflight=False)
    assert resource["metadata"]["name"] == "unchecked" and client.list() == [] and not cli.home.exists()
