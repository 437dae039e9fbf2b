"""Client.run with real frameworks on the local backend: functions as multi-replica jobs.

Each function really synchronises its ranks (gloo all-reduce, TensorFlow's collective
all-reduce, XGBoost's Rabit): a wrong env contract hangs or fails the job instead of passing.
"""

from __future__ import annotations

import importlib.util
import time

import pytest

from tests.local import function_jobs
from trainctl import JobFailed

pytestmark = [pytest.mark.framework, pytest.mark.timeout(240)]



def needs(package: str) -> None:
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed here (pip install -r requirements/frameworks.txt)")


def texts(job) -> list[str]:
    """Every replica's lines: followed, because the job may succeed while another replica still prints
    (a PyTorchJob when its Master does, a TFJob when worker 0 does)."""
    return [str(line) for line in job.logs(follow=True)]


def test_pytorch_function_allreduces_on_three_workers(client):
    needs("torch")
    job = client.run(function_jobs.torch_allreduce, args={"offset": 0.5}, framework="pytorch", workers=3,
                     name="fn-torch", backoff_limit=0)
    assert job.wait(timeout=180).status == "Succeeded"
    assert job.result() == {"sum": 60.5, "world_size": 3}  # (1 + 2 + 3) * SCALE + offset, from rank 0
    lines = texts(job)
    for replica, rank in (("master-0", 0), ("worker-0", 1), ("worker-1", 2)):
        assert f"{replica} | torch rank {rank}/3 local_rank 0 sum 6" in lines, lines
    assert not any("trainctl-result" in line for line in lines)  # the result line is plumbing, not output
    assert client.job("fn-torch").result() == job.result()  # a handle made later reads the same result
    job.delete()


def test_tensorflow_function_allreduces(client):
    needs("tensorflow")
    job = client.run(function_jobs.tensorflow_allreduce, framework="tensorflow", workers=2, name="fn-tf",
                     backoff_limit=0)
    assert job.result(timeout=180) == 3.0
    lines = texts(job)
    assert {"worker-0 | tensorflow worker 0 sum 3", "worker-1 | tensorflow worker 1 sum 3"} <= set(lines), lines
    job.delete()


def test_xgboost_function_allreduces(client):
    needs("xgboost")
    job = client.run(function_jobs.xgboost_allreduce, args={"rounds": 3}, framework="xgboost", workers=2,
                     name="fn-xgb", backoff_limit=0)
    assert job.result(timeout=180) == {"sum": 3.0, "trees": 3}
    lines = texts(job)
    assert {"master-0 | xgboost rank 0 sum 3", "worker-0 | xgboost rank 1 sum 3"} <= set(lines), lines
    job.delete()


def test_pytorch_function_under_torchrun_with_two_processes_per_node(client):
    needs("torch")
    job = client.run(function_jobs.torch_allreduce, workers=2, nproc_per_node="2", name="fn-torchrun",
                     backoff_limit=0)
    assert job.result(timeout=180) == {"sum": 100.0, "world_size": 4}  # ranks 0-3: (1+2+3+4) * SCALE
    lines = texts(job)
    assert {"master-0 | torch rank 1/4 local_rank 1 sum 10", "worker-0 | torch rank 3/4 local_rank 1 sum 10"} \
        <= set(lines), lines
    job.delete()


def test_jax_and_mpi_functions(client):
    needs("jax")
    jax_job = client.run(function_jobs.jax_process, framework="jax", workers=2, name="fn-jax", backoff_limit=0)
    assert jax_job.result(timeout=120) == 2
    assert {"worker-0 | jax process 0 of 2", "worker-1 | jax process 1 of 2"} <= set(texts(jax_job))
    jax_job.delete()
    needs("mpi4py")
    mpi_job = client.run(function_jobs.mpi_allreduce, framework="mpi", workers=2, name="fn-mpi", backoff_limit=0)
    assert mpi_job.result(timeout=120) == 3  # from MPI rank 0, in the launcher's log
    assert {"launcher | mpi rank 0 sum 3", "launcher | mpi rank 1 sum 3"} <= set(texts(mpi_job))
    mpi_job.delete()


def test_paddle_function_under_its_launcher(client):
    needs("paddle")
    job = client.run(function_jobs.paddle_allreduce, framework="paddle", workers=2, name="fn-paddle",
                     backoff_limit=0)
    assert job.result(timeout=180) == 3.0  # from trainer 0
    printed = {line.text for line in job.logs(follow=True)}  # Paddle's launcher numbers nodes as they register
    assert {"paddle rank 0 of 2 sum 3", "paddle rank 1 of 2 sum 3"} <= printed, printed
    job.delete()


def test_a_raising_function_fails_wait_naming_the_replica_and_the_exception(client):
    job = client.run(function_jobs.raises, args={"message": "loss is NaN"}, workers=2, name="fn-raise",
                     backoff_limit=0)
    with pytest.raises(JobFailed) as failed:
        job.wait(timeout=60)
    text = str(failed.value)
    assert failed.value.summary.first.replica == "worker-0"
    assert text.startswith("worker-0 raised ValueError: loss is NaN; exit code 1"), text
    assert "trainctl: raises() raised ValueError: loss is NaN" in text, text
    with pytest.raises(JobFailed):
        job.result()
    job.delete()


def test_a_function_jobs_files_go_with_the_job(client, cli):
    """What a function job wrote under $TRAINCTL_HOME/functions is removed by delete, and by the TTL."""
    functions = cli.home / "functions"
    deleted = client.run(function_jobs.decorated, args={"x": 1}, framework="jax", name="fn-files")
    assert deleted.result(timeout=60) == 2
    assert len(list(functions.iterdir())) == 1
    deleted.delete()
    assert list(functions.iterdir()) == []

    client.run(function_jobs.decorated, args={"x": 2}, framework="jax", name="fn-ttl", ttl_after_finished=0)
    assert len(list(functions.iterdir())) == 1
    deadline = time.monotonic() + 60
    while [job.name for job in client.jobs()] and time.monotonic() < deadline:  # its supervisor deletes it
        time.sleep(0.2)
    assert [job.name for job in client.jobs()] == []
    assert list(functions.iterdir()) == []
