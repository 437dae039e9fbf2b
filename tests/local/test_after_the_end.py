"""What a user sees between restarts and after a job ended while some of its replicas did not (issue 32)."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.timeout(120)

FAILS_ONCE_THEN_WAITS = """
import pathlib, sys, time
marker = pathlib.Path("ran-once")
if not marker.exists():
    marker.touch()
    print("the first run says this", flush=True)
    sys.exit(1)
time.sleep(60)  # the second run prints nothing (yet)
"""


def until(predicate, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}")


def test_logs_between_two_runs_points_at_the_previous_ones(cli):
    (cli.cwd / "once.py").write_text(FAILS_ONCE_THEN_WAITS)
    assert cli("submit", "pytorch", "--name", "again", "--workers", "1", "--", "python", "once.py").returncode == 0
    until(lambda: "1" in cli("status", "again").stdout.split("again-master-0")[-1].split()[1:3], "a restart")
    current = cli("logs", "again")
    assert current.stdout == "" and "0 line(s)" in current.stderr
    assert "master-0 restarted, its last run's output is under trainctl logs again --previous" in current.stderr
    assert "the first run says this" in cli("logs", "again", "--previous").stdout
    cli("delete", "again")


def test_status_names_replicas_left_running_after_their_job_succeeded(cli):
    """A TFJob succeeds with its chief; cleanPodPolicy None (upstream's default) keeps its workers running."""
    (cli.cwd / "role.py").write_text("import json, os, time\n"
                                     "if json.loads(os.environ['TF_CONFIG'])['task']['type'] != 'chief':\n"
                                     "    time.sleep(60)\n")
    submitted = cli("submit", "tensorflow", "--name", "lingers", "--chief", "1", "--workers", "1",
                    "--wait", "--", "python", "role.py")
    assert submitted.returncode == 0, submitted.stderr
    status = cli("status", "lingers").stdout
    assert "lingers-worker-0 still running after the job ended (cleanPodPolicy None keeps it): trainctl delete " \
           "lingers stops it" in " ".join(status.split()), status
    cli("delete", "lingers")
