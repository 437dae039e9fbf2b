"""Every framework's example really trains as a 2-replica job on the local backend.

Each test submits through the CLI (so the framework is imported only in the replica
processes, never in pytest: TensorFlow and Paddle crash when loaded in one process),
waits, and reads each rank's result line from ``trainctl logs``: the framework's own
all-reduce of (rank + 1) must give 1 + 2 = 3 and the final model hash must be equal on
both ranks, which only happens when the gradients really were synchronised.
"""

from __future__ import annotations

import importlib.util
import json
import time

import pytest

from tests.conftest import REPO

EXAMPLES = REPO / "examples"

# framework -> (package that must be importable, submit kind, command after --)
CASES = {
    "pytorch": ("torch", "pytorch", ["python", str(EXAMPLES / "pytorch" / "train_ddp.py"), "--epochs", "1"]),
    "tensorflow": ("tensorflow", "tf", ["python", str(EXAMPLES / "tensorflow" / "train_mwms.py")]),
    "xgboost": ("xgboost", "xgboost", ["python", str(EXAMPLES / "xgboost" / "train_collective.py")]),
    "mpi": ("mpi4py", "mpi", ["python", str(EXAMPLES / "mpi" / "allreduce.py")]),
    "paddle": ("paddle", "paddle", ["python", "-m", "paddle.distributed.launch",
                                    str(EXAMPLES / "paddle" / "train_collective.py")]),
    "jax": ("jax", "jax", ["python", str(EXAMPLES / "jax" / "train_distributed.py")]),
}


def results(log_text: str) -> list[dict]:
    """The JSON result line of each rank (the text after the ``replica |`` prefix)."""
    found = []
    for line in log_text.splitlines():
        text = line.partition("| ")[2].strip()
        if text.startswith("{") and '"event": "result"' in text:
            found.append(json.loads(text))
    return found


@pytest.mark.framework
@pytest.mark.timeout(300)
@pytest.mark.parametrize("framework", list(CASES))
def test_two_replica_job_trains_and_agrees(cli, framework):
    package, kind, command = CASES[framework]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed in this environment (pip install -r requirements/frameworks.txt)")
    name = f"fw-{framework}"
    submitted = cli("submit", kind, "--name", name, "--workers", "2", "--", *command)
    assert submitted.returncode == 0, submitted.stderr

    waited = cli("wait", name, "--timeout", "4m", timeout=280)
    log_text = cli("logs", name).stdout
    assert waited.returncode == 0, f"{framework} job did not succeed:\n{cli('status', name).stdout}\n{log_text[-4000:]}"

    # the job succeeds when its chief does (cleanPodPolicy None): another rank may still be writing
    deadline = time.monotonic() + 60
    while len(results(log_text)) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
        log_text = cli("logs", name).stdout
    ranks = results(log_text)
    assert sorted(r["rank"] for r in ranks) == [0, 1], log_text[-4000:]
    assert all(r["world_size"] == 2 and r["allreduce_sum"] == 3 for r in ranks), ranks
    assert len({r["model_hash"] for r in ranks}) == 1, ranks
    cli("delete", name)
