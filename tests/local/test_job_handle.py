"""The JobHandle's life cycle on the local backend: suspend, resume, failure, listing, deletion; the one call
that streams a job's logs and returns its value; how handles, job lists and logs show in IPython."""

from __future__ import annotations

import pytest

from IPython.core.formatters import DisplayFormatter

from tests.local import function_jobs
from trainctl import JobFailed
from trainctl.errors import NotFound, UserError

pytestmark = pytest.mark.timeout(90)



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


def test_follow_streams_until_the_job_ends(client):
    job = client.run(function_jobs.counts, args={"to": 5}, framework="jax", name="counts")
    assert [line.text for line in job.logs(follow=True)] == [f"count {n}" for n in range(5)]
    assert job.status == "Succeeded"
    job.delete()


def test_a_result_over_the_limit_fails_the_job_saying_so(client):
    job = client.run(function_jobs.too_big, framework="jax", name="big", backoff_limit=0)
    with pytest.raises(JobFailed, match="more than the 1,048,576 a result may have: save it to storage"):
        job.wait(timeout=60, progress=False)
    job.delete()


def test_a_line_that_only_looks_like_a_result_is_never_unpickled(client):
    job = client.run(function_jobs.prints_a_forged_result, framework="jax", name="forged")
    assert job.result(timeout=60) == 5
    raw = [line.text.split(" ")[0] for line in client.logs("forged")]  # the runner's line on a line of its own
    assert raw == ["trainctl-result:v1", "", "trainctl-result:v2"], raw
    assert list(job.logs()) == []  # neither result line, nor the runner's newline, is output to read
    job.delete()


def test_result_can_stream_the_logs_and_return_the_value(client, capsys):
    job = client.run(function_jobs.counts, args={"to": 3}, framework="jax", name="streamed")
    with pytest.raises(UserError, match="has no result yet: result.wait=True. waits for it"):
        job.result(wait=False)
    assert job.result(follow_logs=True) == 3
    assert capsys.readouterr().out.splitlines() == [f"worker-0 | count {n}" for n in range(3)]
    job.delete()


def test_handles_job_lists_and_logs_show_as_tables_and_text(client):
    job = client.run(function_jobs.counts, args={"to": 2}, framework="jax", workers=2, name="shown")
    job.wait(timeout=60, progress=False)
    for shown in job, client.jobs():  # what IPython shows: HTML in a notebook, text in a terminal
        data, _ = DisplayFormatter().format(shown)
        html, text = data["text/html"], data["text/plain"]
        assert html.startswith("<table") and "<td>shown</td>" in html and "<td>Succeeded</td>" in html, html
        assert text.splitlines()[0].split() == ["NAMESPACE", "NAME", "KIND", "STATE", "ATTEMPT", "REPLICAS", "AGE",
                                                "DURATION", "PROGRESS"], text
        assert text.splitlines()[1].split()[:6] == ["default", "shown", "JAXJob", "Succeeded", "1", "2"], text
    assert repr(job) == "<JobHandle jaxjob/shown in default on local>"  # no I/O: what debuggers and lists show
    assert [handle.name for handle in client.jobs()] == ["shown"] and isinstance(client.jobs(), list)
    logs = DisplayFormatter().format(job.logs())[0]["text/plain"]
    assert [f"worker-{rank} | count {n}" for rank in (0, 1) for n in (0, 1)] == sorted(logs.splitlines()), logs
    job.delete()
