"""Failures explain themselves on the local backend: real replica processes that raise, crash-loop or hang.

Every way of watching a job (``status``, ``wait``, ``submit --wait/--follow``, ``Client.wait``) must
end a failed job with the same summary: the replica that failed first, its exit code and the
last lines of its log, the traceback's last line included.
"""

from __future__ import annotations

import signal
import time

import pytest

from trainctl.api import Client
from trainctl.errors import JobFailed

pytestmark = pytest.mark.timeout(90)

# RANK 0 (the master) sleeps SLEEP seconds and exits 0; RANK 1 (the worker) raises after a moment.
RAISES = """
import os, sys, time
if os.environ["RANK"] == "1":
    time.sleep(0.3)
    print("worker step 1", flush=True)
    raise RuntimeError("the worker exploded on purpose")
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 30)
"""
TRACEBACK_END = "RuntimeError: the worker exploded on purpose"


@pytest.fixture
def raises(cli):
    (cli.cwd / "raises.py").write_text(RAISES)
    return cli


def submit(cli, name: str, *options: str, script: str = "raises.py"):
    return cli("submit", "pytorch", "--name", name, "--workers", "2", *options, "--", "python", script)


def assert_worker_summary(text: str) -> None:
    assert "worker-0 failed first: exit code 1 (Error)" in text
    assert f"| {TRACEBACK_END}" in text
    assert "trainctl logs" in text and "--replica worker-0" in text


def test_submit_wait_status_and_wait_end_with_the_failing_workers_summary(raises):
    result = submit(raises, "boom", "--restart-policy", "Never", "--wait")
    assert result.returncode == 1, result.stderr
    assert_worker_summary(result.stderr)
    status = raises("status", "boom")
    assert status.returncode == 0
    assert_worker_summary(status.stdout)
    worker = next(line.split() for line in status.stdout.splitlines() if line.startswith("boom-worker-0"))
    assert worker[1:4] == ["Failed", "0", "1"]
    again = raises("wait", "boom")
    assert again.returncode == 1 and "boom: Failed" in again.stderr
    assert_worker_summary(again.stderr)


def test_submit_follow_prints_the_logs_then_the_summary(raises):
    result = submit(raises, "followed", "--restart-policy", "Never", "--follow")
    assert result.returncode == 1, result.stderr
    assert "worker step 1" in result.stdout
    assert_worker_summary(result.stderr)


def test_the_python_api_raises_job_failed_with_the_same_summary(raises, monkeypatch):
    assert submit(raises, "api-fail", "--restart-policy", "Never").returncode == 0
    monkeypatch.setenv("TRAINCTL_HOME", str(raises.home))
    client = Client("local")
    with pytest.raises(JobFailed) as failed:
        client.wait("api-fail", timeout=60, raise_on_failure=True)
    summary = failed.value.summary
    assert (summary.first.replica, summary.first.exit_code, summary.first.previous) == ("worker-0", 1, False)
    assert summary.log_tail[-1] == TRACEBACK_END and summary.log_tail[0] == "worker step 1"
    assert_worker_summary(str(failed.value))
    assert client.wait("api-fail", until="failed")["metadata"]["name"] == "api-fail"  # awaited: no exception


def test_a_crash_looping_worker_shows_crash_loop_back_off_and_its_last_exit_code(raises):
    assert submit(raises, "looping", "--restart-policy", "OnFailure", "--backoff-limit", "100").returncode == 0
    seen = set()
    deadline = time.monotonic() + 45
    while not {"CrashLoopBackOff", "Running"} <= seen:
        assert time.monotonic() < deadline, f"saw only {seen}"
        lines = raises("status", "looping").stdout.splitlines()
        cells = next((line.split() for line in lines if line.startswith("looping-worker-0")), [])
        if len(cells) > 4 and cells[2] != "0":  # restarted at least once: the last run's code shows
            assert cells[3:6] == ["1", "(last", "run)"] and "last: Error" in " ".join(cells), cells
            seen.add(cells[1])
        time.sleep(0.2)
    assert raises("delete", "looping").returncode == 0


def test_a_job_that_succeeds_despite_a_failed_worker_says_so(raises):
    (raises.cwd / "late.py").write_text("import os, sys, time\n"
                                        "if os.environ['RANK'] == '1':\n    time.sleep(1)\n    sys.exit(2)\n")
    assert submit(raises, "mixed", "--restart-policy", "Never", script="late.py").returncode == 0
    deadline = time.monotonic() + 45
    while True:  # the job succeeds with its master; the worker fails a moment later
        status = raises("status", "mixed").stdout
        worker = next((line.split() for line in status.splitlines() if line.startswith("mixed-worker-0")), [])
        if worker[1:4] == ["Failed", "0", "2"]:
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    assert "Succeeded" in status.splitlines()[0] and "succeeded, but worker-0 failed: exit code 2" in status
    result = raises("wait", "mixed")
    assert result.returncode == 0, result.stderr
    assert "note: pytorchjob/mixed succeeded, but worker-0 failed: exit code 2" in result.stderr


def test_wait_for_several_jobs_in_any_spelling(raises):
    (raises.cwd / "ok.py").write_text("print('fine')\n")
    for name in ("one", "two"):
        assert submit(raises, name, script="ok.py").returncode == 0
    assert raises("wait", "one", "two", "--for", "condition=SUCCEEDED", "--timeout", "60s").returncode == 0
    assert submit(raises, "bad", "--restart-policy", "Never").returncode == 0
    mixed = raises("wait", "one", "bad", "--for", "succeeded", "--timeout", "60s")
    assert mixed.returncode == 1 and "one: Succeeded" in mixed.stderr and "bad: Failed" in mixed.stderr
    wrong = raises("wait", "one", "--for", "complete")
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1 and "--for 'complete'" in wrong.stderr


@pytest.mark.parametrize("watch", ["--wait", "--follow"])
def test_ctrl_c_stops_watching_only_and_says_how_to_stop_the_job(raises, watch):
    (raises.cwd / "slow.py").write_text("import time\nprint('working', flush=True)\ntime.sleep(60)\n")
    watcher = raises.popen("submit", "pytorch", "--name", "slow", "--workers", "1", watch, "--", "python", "slow.py")
    deadline = time.monotonic() + 45
    while "Running" not in raises("status", "slow").stdout.split("\n")[0]:
        assert time.monotonic() < deadline and watcher.poll() is None
        time.sleep(0.2)
    watcher.send_signal(signal.SIGINT)
    out, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 130, err
    assert "Traceback" not in err
    assert "stopped watching slow; the job keeps running: trainctl status slow -n default to check, " \
           "trainctl delete slow -n default to stop it" in " ".join(err.split())
    assert "Running" in raises("status", "slow").stdout.split("\n")[0]  # the job outlived its watcher
    assert raises("delete", "slow").returncode == 0
