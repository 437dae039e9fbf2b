"""The Training Operator's own example YAML, applied unchanged on the local backend as a user would.

Each example is applied for real (not a dry run) from a directory that holds, at the same relative
path, a small script of ours in place of the program its image would supply. Those that need no
more reach Succeeded; those that cannot run as processes on this machine are refused before
anything is created, with the one-line reason asserted here. docs/compatibility.md has the table.
"""

from __future__ import annotations

import re

import pytest
import yaml

# A stand-in for an image's training script: proves the replica got its kind's env, then exits 0.
ENV_PROBE = """import os, sys
print("env", *(f"{name}={os.environ.get(name)}" for name in sys.argv[1:]), flush=True)
"""
RUNS = {  # example file -> (job name, its namespace, the script its image would supply, the env it shows)
    "jax__cpu-demo__demo.yaml": ("jaxjob-simple", "kubeflow", "train.py", "COORDINATOR_ADDRESS"),
    "pytorch__elastic__echo__echo.yaml": ("elastic-example-echo", "default", "echo.py", "WORLD_SIZE"),
}
ENTRYPOINT_MISSING = "relies on its image's entrypoint, which the local backend cannot run"
REFUSED = {  # example file -> what trainctl says (one line, exit 2, nothing created)
    "pytorch__simple.yaml": "no file /opt/pytorch-mnist/mnist.py on this machine: an image may hold it",
    "tensorflow__simple.yaml": "no file /var/tf_mnist/mnist_with_summaries.py on this machine",
    "tensorflow__distribution_strategy__multi_worker_tfjob.yaml": f"names no command and {ENTRYPOINT_MISSING}",
    "xgboost__lightgbm-dist__xgboostjob_v1_lightgbm_dist_training.yaml":
        f"names only args (--job_type=Train --boosting_type=gbdt ...) and {ENTRYPOINT_MISSING}",
    "mpi__tensorflow-mnist.yaml": "Open MPI 5.0.11, which reads -bind-to -map-by as the program to run",
}
PADDLE = "paddlepaddle__simple-cpu.yaml"  # runs paddle's own distributed test: needs no script of ours


def examples(upstream):
    return sorted(path.name for path in (upstream / "examples").glob("*.yaml"))


def test_every_upstream_example_has_an_expected_outcome(upstream):
    assert set(examples(upstream)) == {*RUNS, *REFUSED, PADDLE}


def wait_state(cli, name: str, namespace: str, timeout: float = 120) -> str:
    result = cli("wait", name, "-n", namespace, "--timeout", f"{timeout:g}s", timeout=timeout + 30)
    return result.stderr


@pytest.mark.parametrize("example", sorted(RUNS))
def test_an_example_that_needs_only_its_script_succeeds(cli, upstream, example):
    name, namespace, script, variable = RUNS[example]
    (cli.cwd / script).write_text(ENV_PROBE.replace("sys.argv[1:]", repr([variable])))
    applied = cli("apply", "-f", str(upstream / "examples" / example))
    assert applied.returncode == 0, applied.stderr
    assert f"in namespace {namespace}" in applied.stdout
    if namespace != "default":  # the next command a user types finds it
        assert f"trainctl status {name} -n {namespace}" in applied.stdout
        lost = cli("status", name)
        assert lost.returncode == 2 and f'there is one in namespace "{namespace}": add -n {namespace}' in lost.stderr
        listed = cli("list").stdout.strip()
        assert listed == f"no jobs in namespace default (local); 1 in {namespace}: use -n {namespace} or -A", listed
    waited = wait_state(cli, name, namespace)
    assert f"{name}: Succeeded" in waited, waited
    logs = cli("logs", name, "-n", namespace).stdout
    assert f"env {variable}=" in logs and f"env {variable}=None" not in logs, logs


@pytest.mark.parametrize("example", sorted(REFUSED))
def test_an_example_that_cannot_run_as_local_processes_is_refused_in_one_line(cli, upstream, example):
    for dry_run in (["--dry-run"], []):  # the dry run makes the real apply's checks
        result = cli("apply", "-f", str(upstream / "examples" / example), *dry_run)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1 and REFUSED[example] in result.stderr, result.stderr
    listing = cli("list", "-A")
    assert "no jobs" in listing.stdout + listing.stderr


def test_apply_entrypoint_supplies_what_the_image_would_have_run(cli, upstream):
    """The XGBoost example's args follow the command --entrypoint gives, on every replica."""
    (cli.cwd / "dist_train.py").write_text("import sys; print('args', sys.argv[1], sys.argv[-1], flush=True)\n")
    example = upstream / "examples" / "xgboost__lightgbm-dist__xgboostjob_v1_lightgbm_dist_training.yaml"
    applied = cli("apply", "-f", str(example), "--entrypoint", "python dist_train.py")
    assert applied.returncode == 0, applied.stderr
    assert "lightgbm-dist-train-test: Succeeded" in wait_state(cli, "lightgbm-dist-train-test", "default")
    lines = cli("logs", "lightgbm-dist-train-test").stdout.splitlines()
    assert sorted(line.split(" |")[0].strip() for line in lines if "args --job_type=Train" in line) == \
        ["master-0", "worker-0", "worker-1"]


def test_paddles_run_check_example_trains_across_both_workers_and_succeeds(cli, upstream):
    """Unchanged: `python -m paddle.distributed.launch run_check` trains paddle's own ResNet test on both workers,
    whose collective initializes from the PADDLE_* env trainctl gives. As in a pod on a CPU-only node, the
    replicas have no CUDA_VISIBLE_DEVICES at all: an empty one made paddle's launcher take the machine for a
    GPU one, and the job restarted for ever (issue 32)."""
    cli.without_gpus()
    applied = cli("apply", "-f", str(upstream / "examples" / PADDLE))
    assert applied.returncode == 0, applied.stderr
    waited = wait_state(cli, "paddle-simple-cpu", "kubeflow", timeout=240)
    logs = cli("logs", "paddle-simple-cpu", "-n", "kubeflow").stdout
    assert "paddle-simple-cpu: Succeeded" in waited, waited + logs[-3000:]
    for rank in (0, 1):
        # fleet's data-parallel group spans the two workers
        assert re.search(rf"worker-{rank} \| .*HybridParallelInfo: rank_id: {rank}, .*dp_degree: 2, .*"
                         r"dp_group: \[0, 1\]", logs), logs[-3000:]
        assert f"worker-{rank} | Distributed training completed" in logs, logs[-3000:]
    status = cli("status", "paddle-simple-cpu", "-n", "kubeflow").stdout
    assert "RESTARTS" in status and all(row.split()[2] == "0" for row in status.splitlines()
                                        if row.startswith("paddle-simple-cpu-worker-")), status


def test_a_yaml_without_backoff_limit_that_keeps_failing_gets_one_hint_while_waiting(cli, upstream):
    """Upstream's OnFailure without a backoffLimit restarts for ever (its meaning, kept): `wait` says so once."""
    job = yaml.safe_load((upstream / "examples" / PADDLE).read_text())
    container = job["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["args"] = ["fail.py"]
    (cli.cwd / "fail.py").write_text("raise SystemExit('this run fails')\n")
    applied = cli("apply", "-f", "-", input=yaml.safe_dump(job))
    assert applied.returncode == 0, applied.stderr
    try:
        # wait looks at the restarts every 5 s (trainctl.cli.wait.RESTART_CHECK_S) from its start, the first
        # restart comes within a second or two: 12 s hold that look and at least one more after the hint
        waited = cli("wait", "paddle-simple-cpu", "-n", "kubeflow", "--timeout", "12s", timeout=60)
        assert waited.returncode != 0
        assert waited.stderr.count("has no backoffLimit, so it restarts for as long as it fails") == 1, \
            waited.stderr
    finally:
        cli("delete", "paddle-simple-cpu", "-n", "kubeflow")
