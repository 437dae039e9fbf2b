"""Issue 34 on the local backend: a failure survived by restarting the whole job from its last complete checkpoint,
and a budget that counts what users think it counts. Real replica processes, real DDP (gloo), trainctl's own
checkpoint API; every claim is read from what the replicas printed and what the job recorded."""

from __future__ import annotations

import json
import time

import pytest

from tests.checkpointed import EXITS, SCRIPT, started
from trainctl.core.restarts import Record

pytestmark = pytest.mark.timeout(240)
torch = pytest.importorskip("torch")


def run_ddp(cli, name: str, *options: str, env: dict | None = None, timeout: float = 180):
    (cli.cwd / "ddp.py").write_text(SCRIPT)
    env_flags = [word for key, value in (env or {}).items() for word in ("-e", f"{key}={value}")]
    result = cli("submit", "pytorch", "--name", name, "--workers", "2", *options, *env_flags, "--", "python", "ddp.py")
    assert result.returncode == 0, result.stderr
    waited = cli("wait", name, "--timeout", f"{timeout:g}s", timeout=timeout + 30)
    return waited


def output(cli, name: str, previous: bool = False) -> str:
    return cli("logs", name, *(["--previous"] if previous else [])).stdout


def resource(cli, name: str) -> dict:
    return json.loads(cli("status", name, "-o", "json").stdout)


def test_a_killed_rank_restarts_the_whole_job_from_its_last_complete_checkpoint(cli):
    """Done when, local: 2 replicas, --restart-scope job, checkpoints every 10 of 60 steps, rank 1 SIGKILLs itself
    at step 25 on its first attempt: Succeeded at step 60, both replicas started again from step 20 with another
    TRAINCTL_RESTART_ATTEMPT."""
    waited = run_ddp(cli, "survives", "--restart-scope", "job", "--backoff-limit", "0", env={"KILL_AT": "25"})
    assert "survives: Succeeded" in waited.stderr, waited.stderr + output(cli, "survives")
    first, last = output(cli, "survives", previous=True), output(cli, "survives")
    assert sorted(started(first)) == [(0, 0, 0), (1, 0, 0)], first
    assert "rank 1 attempt 0 killing itself at step 25" in first
    assert sorted(started(last)) == [(0, 1, 20), (1, 1, 20)], last  # both, from the last complete checkpoint
    assert "rank 0 attempt 1 done step 60" in last and "rank 1 attempt 1 done step 60" in last
    record = Record.of(resource(cli, "survives"))
    assert (record.attempt, record.counted, record.disruptions) == (1, 0, 1)  # a signal spends no backoffLimit
    assert record.history[0]["cause"] == "worker-0: exit 137, SIGKILL"
    status = cli("status", "survives").stdout
    assert "attempt 2 (restarted after worker-0: exit 137, SIGKILL)" in status, status
    listed = cli("list").stdout.splitlines()
    assert listed[1].split()[3:5] == ["Succeeded", "2"], listed  # STATE, ATTEMPT


def test_a_half_written_checkpoint_is_never_loaded(cli):
    """Rank 1 dies half-way through writing step 30 (its file there is garbage and unmarked; rank 0's is whole and
    marked): the next attempt resumes from step 20, the newest checkpoint every rank completed."""
    waited = run_ddp(cli, "halfway", "--restart-scope", "job", env={"HALF_WRITE_AT": "30"})
    assert "halfway: Succeeded" in waited.stderr, waited.stderr + output(cli, "halfway")
    assert sorted(started(output(cli, "halfway"))) == [(0, 1, 20), (1, 1, 20)]
    checkpoint = cli.home / "jobs" / "default" / "halfway" / "checkpoints" / "step-30"
    # rewritten whole by the second attempt: both ranks' markers of attempt 1, the first attempt's gone
    assert sorted(path.name for path in (checkpoint / ".trainctl-complete").iterdir()) == ["1-0-of-2", "1-1-of-2"]


@pytest.mark.parametrize("scope", ["replica", "job"])
@pytest.mark.parametrize("policy, listed", [("OnFailure", None), ("Always", None), ("ExitCode", "3")])
def test_backoff_limit_1_and_exit_3_on_every_attempt_fails_after_exactly_two(cli, tmp_path, scope, policy, listed):
    (cli.cwd / "exits.py").write_text(EXITS)
    starts = tmp_path / "starts"
    options = ["--restart-scope", scope, "--restart-policy", policy, "--backoff-limit", "1",
               *(["--retry-on-exit-codes", listed] if listed else [])]
    name = f"three-{scope}-{policy.lower()}"
    result = cli("submit", "pytorch", "--name", name, "--workers", "2", *options, "-e", f"STARTS={starts}",
                 "-e", "CODE=3", "-e", "WAIT=1", "--", "python", "exits.py")
    assert result.returncode == 0, result.stderr
    waited = cli("wait", name, "--timeout", "120s", timeout=150)
    assert f"{name}: Failed" in waited.stderr, waited.stderr
    time.sleep(0.5)
    worker_starts = [line for line in starts.read_text().splitlines() if line.startswith("1 ")]
    assert len(worker_starts) == 2, starts.read_text()
    record = Record.of(resource(cli, name))
    assert record.counted == 1 and record.disruptions == 0
    assert record.attempt == (1 if scope == "job" else 0)
    assert "backoff limit" in cli("status", name).stdout


def test_a_raised_exception_is_not_retried_in_job_scope(cli, tmp_path):
    (cli.cwd / "exits.py").write_text(EXITS)
    starts = tmp_path / "starts"
    cli("submit", "pytorch", "--name", "raises", "--workers", "2", "--restart-scope", "job", "--backoff-limit", "5",
        "-e", f"STARTS={starts}", "-e", "RAISE=1", "-e", "WAIT=1", "--", "python", "exits.py")
    waited = cli("wait", "raises", "--timeout", "60s", timeout=90)
    assert "raises: Failed" in waited.stderr and "ValueError: a bug, the same on every attempt" in waited.stderr
    assert [line for line in starts.read_text().splitlines() if line.startswith("1 ")] == ["1 0"]
    assert Record.of(resource(cli, "raises")).attempt == 0


def test_a_listed_exit_code_is_retried_in_job_scope(cli, tmp_path):
    (cli.cwd / "exits.py").write_text(EXITS)
    starts = tmp_path / "starts"
    cli("submit", "pytorch", "--name", "listed", "--workers", "2", "--restart-scope", "job", "--restart-policy",
        "ExitCode", "--retry-on-exit-codes", "42", "-e", f"STARTS={starts}", "-e", "CODE=42", "-e", "ONCE=1",
        "--", "python", "exits.py")
    waited = cli("wait", "listed", "--timeout", "60s", timeout=90)
    assert "listed: Succeeded" in waited.stderr, waited.stderr
    assert sorted(starts.read_text().splitlines()) == ["0 0", "0 1", "1 0", "1 1"]  # both ranks, a second attempt
    record = Record.of(resource(cli, "listed"))
    assert (record.attempt, record.counted) == (1, 1) and record.history[0]["cause"] == "worker-0: exit 42"
