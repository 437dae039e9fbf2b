"""The Python API on the local backend: submit a resource, wait with progress, read logs, delete."""

from __future__ import annotations

import json

import pytest

from trainctl.core.conditions import state_of
from trainctl.errors import NotFound

pytestmark = pytest.mark.timeout(60)



def rendered(cli, *command: str) -> dict:
    result = cli("submit", "jax", "--name", "api", "--workers", "2", "--dry-run", "-o", "json", "--", *command)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_submit_wait_logs_delete(cli, client):
    (cli.cwd / "hello.py").write_text("import os\nprint('process', os.environ['PROCESS_ID'], flush=True)\n")
    stored = client.submit(rendered(cli, "python", "hello.py"))
    assert stored["metadata"]["uid"] and stored["metadata"]["namespace"] == "default"

    seen = []
    final = client.wait("api", until="Succeeded", timeout=30, on_progress=lambda job: seen.append(state_of(job)))
    assert state_of(final) == "Succeeded" and seen[-1] == "Succeeded"
    lines = sorted((line.replica, line.text) for line in client.logs("api"))
    assert lines == [("worker-0", "process 0"), ("worker-1", "process 1")]
    assert [row.state for row in client.get("api").replicas] == ["Succeeded", "Succeeded"]
    assert [job["metadata"]["name"] for job in client.list()] == ["api"]

    client.delete("api")
    with pytest.raises(NotFound):
        client.get("api")


def test_wait_times_out(cli, client):
    (cli.cwd / "slow.py").write_text("import time\ntime.sleep(30)\n")
    client.submit(rendered(cli, "python", "slow.py"))
    with pytest.raises(TimeoutError, match="did not reach Succeeded"):
        client.wait("api", timeout=0.5)
    client.delete("api")
