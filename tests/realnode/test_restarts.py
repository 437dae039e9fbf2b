"""Issue 34 on the real node: a job that survives a deleted pod and a suspend mid-run (what Kueue's preemption
does) by restarting every replica from its last complete checkpoint, without spending its restart budget.

The DDP script (tests/checkpointed.py) uses trainctl's checkpoint API through the stand-in package (the python
image has no trainctl) and checkpoints into ``--checkpoints host:DIR``, a directory of the node (as a PVC would
be elsewhere), which it also writes its events to: a deleted pod's output goes with it, that directory stays.
``--backoff-limit 0``: a restart that spent the budget would fail the job.

The first attempt checkpoints every EVERY steps at STEP_SECONDS a step (later attempts run unpaced), and the test
disrupts it once its second checkpoint is saved: the restart then has two complete ones to choose from and must
take the later, and the pace leaves (60 - 2 * EVERY) * 0.4 s to disrupt it before it would end by itself.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.checkpointed import saved, started
from tests.realnode.conftest import JOB_TIMEOUT_S
from trainctl.core.restarts import Record

pytestmark = pytest.mark.realnode

EVERY = 2  # CHECKPOINT_EVERY: a second checkpoint after 4 paced steps (at 10, 8 s went on the wait for it)


def submit(trainctl, namespace: str, name: str, image: str, project: Path, storage: Path) -> Path:
    result = trainctl("submit", "pytorch", "--name", name, "-n", namespace, "--workers", "2", "--image", image,
                      "--workdir", str(project), "--restart-scope", "job", "--backoff-limit", "0",
                      "--checkpoints", f"host:{storage}", "-e", "STEP_SECONDS=0.4",
                      # 900m: two such pods and the controller's 100m fit the 2-core node; at 500m the CFS quota
                      # doubled the wall time of each start's torch import
                      "-e", f"CHECKPOINT_EVERY={EVERY}", "--cpu", "900m",
                      "--", "python3", "ddp.py")
    assert result.returncode == 0, result.stderr
    return storage / namespace / name  # the job's own directory under the host path


def events(directory: Path) -> str:
    return "".join(path.read_text() for path in sorted(directory.glob("events-rank*.log")))


def wait_until(condition, what: str, timeout: float = JOB_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.5)
    return found


def finished(trainctl, namespace: str, name: str, directory: Path) -> dict:
    waited = trainctl("wait", name, "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    assert waited.returncode == 0, waited.stdout + waited.stderr + events(directory)
    return json.loads(trainctl("status", name, "-n", namespace, "-o", "json").stdout)


def assert_resumed_from_the_last_complete_checkpoint(directory: Path, ranks: int = 2, every: int = EVERY) -> int:
    text = events(directory)
    first_saved = saved(text, attempt=0)
    assert first_saved and min(first_saved) == every, text
    last_complete = max(step for step in set(first_saved) if saved(text, 0).count(step) == ranks)  # all ranks saved
    assert sorted(started(text)) == sorted([(rank, 0, 0) for rank in range(ranks)]
                                           + [(rank, 1, last_complete) for rank in range(ranks)]), text
    assert all(f"rank {rank} attempt 1 done step 60" in text for rank in range(ranks)), text
    markers = directory / f"step-{last_complete}" / ".trainctl-complete"
    assert {path.name.split("-", 1)[1] for path in markers.iterdir()} == {f"{rank}-of-{ranks}" for rank in range(ranks)}
    return last_complete


def test_a_pod_deleted_by_hand_restarts_the_job_from_its_last_complete_checkpoint(
        real_node, trainctl, namespace, python_image, project, tmp_path):
    directory = submit(trainctl, namespace, "deleted", python_image, project, tmp_path / "ckpt")
    wait_until(lambda: 2 * EVERY in saved(events(directory), 0), "the second checkpoint")
    deleted = real_node.kubectl("delete", "pod", "deleted-worker-0", "-n", namespace, "--wait=false")
    assert deleted.returncode == 0, deleted.stderr
    resource = finished(trainctl, namespace, "deleted", directory)
    step = assert_resumed_from_the_last_complete_checkpoint(directory)
    assert step >= 2 * EVERY  # not the first checkpoint: the last complete one
    record = Record.of(resource)
    assert (record.attempt, record.counted, record.disruptions, record.preemptions) == (1, 0, 1, 0), record
    status = trainctl("status", "deleted", "-n", namespace).stdout
    assert "attempt 2 (restarted after " in status and "a disruption, not counted" in status, status
    assert "restarts: 0 counted (backoffLimit 0), 1 after disruptions" in status, status


def test_a_job_suspended_mid_run_and_resumed_as_kueue_does_continues_as_its_next_attempt(
        real_node, trainctl, namespace, python_image, project, tmp_path):
    directory = submit(trainctl, namespace, "preempted", python_image, project, tmp_path / "ckpt")
    wait_until(lambda: 2 * EVERY in saved(events(directory), 0), "the second checkpoint")

    def suspend(value: bool) -> None:  # Kueue evicts and admits by this very patch of the job
        patched = real_node.kubectl("patch", "pytorchjob", "preempted", "-n", namespace, "--type", "merge",
                                    "-p", json.dumps({"spec": {"runPolicy": {"suspend": value}}}))
        assert patched.returncode == 0, patched.stderr

    suspend(True)
    # the pods first: a trainctl process per poll only once they are gone (it costs more CPU than kubectl)
    wait_until(lambda: not json.loads(real_node.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
               and "Suspended" in trainctl("status", "preempted", "-n", namespace).stdout.split("\n")[0],
               "suspended job without pods")
    text = events(directory)
    assert "rank 0 attempt 0 preempted at step" in text and "rank 1 attempt 0 preempted at step" in text, text
    suspend(False)
    resource = finished(trainctl, namespace, "preempted", directory)
    step = assert_resumed_from_the_last_complete_checkpoint(directory)
    assert f"rank 0 attempt 0 preempted at step {step}" in events(directory)  # the SIGTERM's own checkpoint
    record = Record.of(resource)
    assert (record.attempt, record.counted, record.disruptions, record.preemptions) == (1, 0, 0, 1), record
    status = trainctl("status", "preempted", "-n", namespace).stdout
    assert "preempted at " in status and ", resumed at " in status and ", attempt 2" in status, status
    assert trainctl("list", "-n", namespace).stdout.splitlines()[1].split()[3:5] == ["Succeeded", "2"]
