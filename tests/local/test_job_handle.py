"""The JobHandle's life cycle on the local backend: suspend, resume, failure, listing, deletion."""

from __future__ import annotations

import pytest

from trainctl import Client
from trainctl.errors import NotFound

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def client(cli, monkeypatch) -> Client:
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.setenv("PATH", cli.env["PATH"])
    monkeypatch.chdir(cli.cwd)
    return Client("local")


def wait_for(job, state: str) -> None:
    import time

    deadline = time.monotonic() + 30
    while job.status != state:
        assert time.monotonic() < deadline, f"{job} is {job.status}, not {state}"
        time.sleep(0.2)


def test_suspend_resume_list_and_delete(client, cli):
    (cli.cwd / "nap.py").write_text("import time\ntime.sleep(60)\n")
    job = client.run(["python", "nap.py"], framework="jax", workers=2, name="nap", label={"team": "ml"})
    assert repr(job) == "<JobHandle jaxjob/nap in default on local>"
    wait_for(job, "Running")
    assert [replica.state for replica in job.replicas] == ["Running", "Running"]
    assert job.suspend() is job
    wait_for(job, "Suspended")
    job.resume()
    wait_for(job, "Running")
    assert [handle.name for handle in client.jobs(selector="team=ml")] == ["nap"]
    assert client.jobs(selector="team=cv") == []
    assert job.failure() is None
    job.delete()
    with pytest.raises(NotFound):
        client.job("nap")


def test_snapshot_warnings_reach_python_warnings(client, cli, tmp_path):
    (cli.cwd / "train.py").write_text("print(1)\n")
    (cli.cwd / "outside").symlink_to(tmp_path.parent)
    with pytest.warns(UserWarning, match="skipped symlink outside"):
        client.run(["python", "train.py"], workdir=".", dry_run=True)
