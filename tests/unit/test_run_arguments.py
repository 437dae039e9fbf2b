"""Client.run refuses bad input with one InvalidArgument naming the culprit, before anything exists.

Every case runs against a private local state directory, which must still be empty after
the refusal: no job, no shipped function files.
"""

from __future__ import annotations

import functools

import pytest

from tests.local import function_jobs
from trainctl import Client, InvalidArgument, UserError


@pytest.fixture
def client(tmp_path, monkeypatch) -> Client:
    monkeypatch.setenv("TRAINCTL_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return Client("local")


def top_level(lr: float = 0.1) -> float:
    return lr


class Trainer:
    def fit(self) -> None:
        pass


def make_closure():
    factor = 2

    def scaled(x):
        return x * factor

    return scaled


UNPICKLABLE = (line for line in ())  # a generator: pickle refuses it


def uses_unpicklable() -> None:
    print(UNPICKLABLE)


uses_unpicklable.__module__ = "__main__"  # as if defined in a notebook: its globals must travel


CASES = [
    # (target, keywords, text the message must contain)
    (top_level, {"worker": 2}, "unknown keyword 'worker': did you mean workers?"),
    (top_level, {"workers": 0}, "workers 0: must be at least 1"),
    (top_level, {"workers": "3"}, "workers: must be an integer (got '3')"),
    (top_level, {"gpus": True}, "gpus: must be an integer"),
    (top_level, {"backoff_limit": -1}, "backoff_limit -1: must be at least 0"),
    (top_level, {"env": {"BAD NAME": 1}}, "env 'BAD NAME': not a valid variable name"),
    (top_level, {"name": "Bad_Name"}, "metadata.name"),
    (top_level, {"restart_policy": "Sometimes"}, "restart_policy 'Sometimes': use one of"),
    (top_level, {"ps": 1}, "ps applies to tensorflow jobs only"),
    (top_level, {"framework": "pytorc"}, "unknown job kind 'pytorc': did you mean pytorch?"),
    (top_level, {"framework": "tf", "chief": 2}, "chief 2: a TFJob has at most one chief"),
    (top_level, {"args": {"lr": 0.1, "epochs": 3}}, "top_level() cannot be called with ['epochs', 'lr']"),
    (top_level, {"args": [0.1]}, "args=[0.1]: pass a dict of keyword arguments"),
    (top_level, {"args": {"lr": (x for x in ())}}, "args cannot be pickled"),
    (top_level, {"packages": ["numpy"], "pip": ["scipy"]}, "packages= is pip= by its data-science name"),
    (top_level, {"packages": ["--index-url=x"]}, "packages '--index-url=x': give a requirement"),
    (top_level, {"framework": "mpi", "packages": ["numpy"]}, "packages/requirements: not for mpi jobs"),
    (top_level, {"workdir": "no/such/dir"}, "workdir 'no/such/dir': no such directory"),
    (lambda: 1, {}, "cannot ship a lambda"),
    (make_closure(), {}, "cannot ship make_closure.<locals>.scaled: it is defined inside another function"),
    (Trainer().fit, {}, "cannot ship the method Trainer.fit"),
    (functools.partial(top_level, 0.2), {}, "ships a plain function or a command list; got partial"),
    (print, {}, "got builtin_function_or_method"),
    (uses_unpicklable, {}, "the global 'UNPICKLABLE' (generator) that uses_unpicklable uses cannot be pickled"),
    (["python", 3], {}, "give the words as strings"),
    ([], {}, "give the words as strings"),
    (["python", "t.py"], {"args": {"lr": 1}}, "args= is for functions"),
]


@pytest.mark.parametrize(("target", "keywords", "expected"), CASES, ids=[c[2][:40] for c in CASES])
def test_refused_before_anything_is_created(client, tmp_path, target, keywords, expected):
    with pytest.raises(InvalidArgument) as refused:
        client.run(target, **keywords)
    message = str(refused.value)
    assert expected in message and "\n" not in message, message
    assert not any(f"--{key.replace('_', '-')}" in message for key in keywords), "names a flag, not the keyword"
    assert isinstance(refused.value, UserError)
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*")), "something was created"


@pytest.fixture
def cluster_client(k8s_cluster, kubeflow_crds, tmp_path, monkeypatch) -> Client:
    """A client of the real API server with trainctl's CRDs: a dry run makes the create's checks there (the CRD,
    the namespace, the server's own validation with dryRun=All), and stores nothing."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "helper.py").write_text("HELP = 1\n")
    return Client("kubernetes", kubeconfig=str(k8s_cluster.kubeconfig("admin")))


@pytest.mark.k8s
def test_on_a_cluster_a_function_travels_in_the_code_snapshot(cluster_client):
    resource = cluster_client.run(function_jobs.torch_allreduce, workers=2, name="fn", dry_run=True)
    assert "fn" not in [job["metadata"]["name"] for job in cluster_client.list(all_namespaces=True)]
    for spec in resource["spec"]["pytorchReplicaSpecs"].values():
        container = spec["template"]["spec"]["containers"][0]
        assert container["command"] == ["python3", ".trainctl/function/trainctl_function.py"]
        assert container["workingDir"] == "/workspace"  # where the snapshot (with .trainctl/function) unpacks
        assert spec["template"]["spec"]["initContainers"]
    annotations = resource["metadata"]["annotations"]
    assert annotations["trainctl.io/function"] == "tests.local.function_jobs:torch_allreduce"
    with pytest.raises(InvalidArgument, match="no_workdir: a function travels to a cluster in the code snapshot"):
        cluster_client.run(function_jobs.torch_allreduce, no_workdir=True, dry_run=True)


def test_a_command_job_has_no_result(client, tmp_path):
    (tmp_path / "hello.py").write_text("print('hello')\n")
    job = client.run(["python", "hello.py"], framework="jax", name="cmd", env={"GREETING": 1})
    job.wait(timeout=60, progress=False)
    assert [str(line) for line in job.logs()] == ["worker-0 | hello"]
    assert job.resource["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"][0] == \
        {"name": "GREETING", "value": "1"}
    with pytest.raises(UserError, match="runs a command, not a function"):
        job.result()
    assert [handle.name for handle in client.jobs()] == ["cmd"]
    job.delete()


def test_a_decorated_function_ships_and_its_decorator_runs_in_the_replica(client):
    job = client.run(function_jobs.decorated, args={"x": 41}, framework="jax", name="deco")
    assert job.result(timeout=60) == 42
    assert [str(line) for line in job.logs()] == ["worker-0 | calling decorated"]
    job.delete()


def test_a_refused_create_leaves_no_function_files(client, tmp_path):
    first = client.run(function_jobs.decorated, args={"x": 1}, framework="jax", name="twice")
    with pytest.raises(UserError, match="already exists"):  # refused by the backend, after the files were written
        client.run(function_jobs.decorated, args={"x": 1}, framework="jax", name="twice")
    assert len(list((tmp_path / "home" / "functions").iterdir())) == 1, "the refused run's files stayed"
    assert first.result(timeout=60) == 2
    first.delete()
