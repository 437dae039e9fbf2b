"""Progress reports on the local backend (issue 25): ``trainctl.report()`` in replicas, read back by ``status``,
``list``, ``wait``, ``plot`` and the handle; a stall shown, said once, and failing the job at its timeout.

Real replicas (processes) write the reports; what is asserted is what the commands print and return.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from tests.local import function_jobs

pytestmark = pytest.mark.timeout(180)


def wait_until(read, predicate, timeout: float = 60):
    """The first value of ``read()`` that satisfies ``predicate``, polled."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if predicate(value):
            return value
        assert time.monotonic() < deadline, value
        time.sleep(0.2)


def output(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


def test_a_two_replica_function_shows_its_steps_while_it_runs_and_every_point_afterwards(client, cli):
    release = cli.cwd / "release"
    job = client.run(function_jobs.reports_then_waits, args={"steps": 40, "release": str(release)},
                     framework="pytorch", workers=2, name="steps", backoff_limit=0)
    status = wait_until(lambda: cli("status", "steps"), lambda r: "progress: 40/40 (100%)" in r.stdout)
    assert re.search(r"pytorchjob/steps in default on local: Running", status.stdout), status.stdout
    assert re.search(r"progress: 40/40 \(100%\), .*loss 0\.025, \d+s ago", status.stdout), status.stdout
    assert re.search(r"default +steps +PyTorchJob +Running +1 +2 .* 40/40 100%", cli("list").stdout)

    release.touch()
    assert job.wait(timeout=60, progress=False).status == "Succeeded"
    progress = job.progress()
    assert (progress.step, progress.total, progress.metrics) == (40, 40, {"loss": 1 / 40})
    assert progress.eta == 0.0 and progress.time <= time.time()
    assert [replica.replica for replica in progress.replicas] == ["master-0", "worker-0"]  # each reported
    points = job.metrics()
    assert [(point.step, point.total, point.metrics) for point in points] == [
        (step, 40, {"loss": 1 / step}) for step in range(1, 41)]
    assert all(earlier.time <= later.time for earlier, later in zip(points, points[1:]))
    assert len(job.metrics(replica="worker-0")) == 40

    plotted = cli("plot", "steps", "--metric", "loss", "-o", "curve.png")
    assert plotted.returncode == 0, plotted.stderr
    assert (cli.cwd / "curve.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "wrote 40 point(s) of steps to curve.png" in plotted.stderr
    wrong = cli("plot", "steps", "--metric", "acc")
    assert wrong.returncode == 2 and output(wrong).strip() == "error: --metric 'acc': steps reported loss"
    job.delete()


def test_a_plain_script_reports_from_a_python_that_has_no_trainctl(client, cli, tmp_path):
    other = tmp_path / "other-python"  # like an image's interpreter: no trainctl anywhere on its path
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    (cli.cwd / "plain.py").write_text(
        "import trainctl\n"
        "print('trainctl from', trainctl.__file__, flush=True)\n"
        "for step in range(1, 6):\n"
        "    trainctl.report(step=step, total=5, accuracy=step / 5)\n")
    job = client.run([str(other / "bin" / "python"), "plain.py"], framework="jax", name="plain",
                     env={"PYTHONPATH": ""}, backoff_limit=0)
    assert job.wait(timeout=60, progress=False).status == "Succeeded", [str(line) for line in job.logs()]
    (line,) = [line.text for line in job.logs()]
    assert line == f"trainctl from {cli.home}/jobs/default/plain/lib/trainctl/__init__.py"  # the stand-in
    assert [(point.step, point.metrics) for point in job.metrics()] == [(s, {"accuracy": s / 5}) for s in range(1, 6)]
    assert "progress: 5/5 (100%), accuracy 1" in cli("status", "plain").stdout
    job.delete()


def test_a_job_that_stops_reporting_is_called_stalled_said_once_by_wait_and_failed_at_its_timeout(client, cli):
    job = client.run(function_jobs.reports_then_hangs, args={"reports": 5}, framework="pytorch", workers=2,
                     name="hung", stall_after="2s", stall_timeout="8s", backoff_limit=0)
    status = wait_until(lambda: cli("status", "hung"), lambda r: "stalled:" in r.stdout, timeout=30)
    assert re.search(r"progress: 5/100 \(5%\).*\n\s+stalled: no output or progress for [2-7]s", status.stdout), \
        status.stdout
    assert re.search(r"hung +PyTorchJob +Running +1 +2 .* stalled \ds", cli("list").stdout)
    waited = cli("wait", "hung", timeout=60)  # until the stall timeout fails it
    assert waited.returncode == 1, output(waited)
    assert waited.stderr.count("stalled: no output or progress for") == 1, waited.stderr
    assert "hung: Failed" in waited.stderr
    failed = cli("status", "hung").stdout
    assert re.search(r"Failed +True .*it stalled: no replica wrote output or progress for \d+s \(stall timeout 8s\)",
                     failed), failed
    assert [replica.state for replica in job.replicas] == ["Failed", "Failed"]  # stopped, as for a deadline
    assert "stalled" not in cli("list").stdout  # an ended job is no longer stalled
    job.delete()


def test_submit_refuses_a_stall_time_that_is_no_duration(cli):
    for flag, value in (("--stall-after", "soon"), ("--stall-timeout", "0")):
        result = cli("submit", "jax", "--dry-run", flag, value, "--", "python", "x.py")
        assert result.returncode == 2 and output(result).count("\n") == 1, output(result)
        assert output(result).startswith(f"error: {flag}"), output(result)


def test_rank_zero_also_logs_to_mlflow_when_a_tracking_uri_is_set(client, cli, tmp_path, monkeypatch):
    import mlflow

    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 reads a local file store only when allowed
    env = {"MLFLOW_TRACKING_URI": store.as_uri(), "MLFLOW_ALLOW_FILE_STORE": "true"}
    job = client.run(function_jobs.reports_to_mlflow, args={"steps": 10}, framework="pytorch", workers=2,
                     name="tracked", env=env, backoff_limit=0)
    assert job.result(timeout=120) == 10
    tracking = mlflow.MlflowClient(tracking_uri=store.as_uri())
    (run,) = tracking.search_runs(experiment_ids=["0"])  # one run: rank 0's, not one per replica
    assert run.info.run_name == "tracked" and run.info.status == "FINISHED"
    history = tracking.get_metric_history(run.info.run_id, "loss")
    assert [(metric.step, metric.value) for metric in history] == [(step, 1 / step) for step in range(1, 11)]
    assert len(tracking.get_metric_history(run.info.run_id, "accuracy")) == 10
    job.delete()


@pytest.mark.framework
def test_a_lightning_loop_reports_through_trainctls_callback(client):
    job = client.run(function_jobs.lightning_reports, args={"steps": 10}, framework="jax", name="lit",
                     backoff_limit=0)
    assert job.result(timeout=150) == 10
    progress = job.progress()
    assert (progress.step, progress.total) == (10, 10) and "loss" in progress.metrics, progress
    losses = [point.metrics["loss"] for point in job.metrics()]
    assert len(losses) == 10 and losses[-1] < losses[0], losses  # every batch, and it learned
    job.delete()
