"""SDK keywords of the wrong type are refused before anything is created, in one line naming the keyword.

Each case was accepted before (issue 22, section 4): a value became its repr (``env={'A': None}`` ran with
``A=None``, ``packages=[None]`` as ``--pip=None``), a generator or async function was shipped and failed in
the replica, or the call ended in a traceback (``jobs(selector=5)``). And whatever the Python API refuses
names its keyword (``replace=True``), where the CLI names its flag (``--replace``): issue 23, defect 6.
"""

from __future__ import annotations

import re

import pytest

from trainctl import Client, InvalidArgument
from trainctl.compat import TrainingClient
from trainctl.errors import UserError


def plain(x=1):
    return x


def generator():
    yield 1


async def coroutine():
    return 1


@pytest.mark.parametrize(("target", "keywords", "named"), [
    (plain, {"env": {"A": None}}, "env: None is a NoneType"),
    (plain, {"env": {"A": b"x"}}, "env: b'x' is a bytes"),
    (plain, {"env": {"A": object()}}, "env: <object object"),
    (plain, {"env": ["A=1", None]}, "env: None"),
    (plain, {"packages": [None]}, "packages: None"),
    (generator, {}, "generator function"),
    (coroutine, {}, "async function"),
    (plain, {"pickle_result": "yes"}, "pickle_result='yes'"),
])
def test_run_refuses_in_one_line(client, cli, target, keywords, named):
    with pytest.raises(InvalidArgument) as refused:
        client.run(target, **keywords)
    assert named in refused.value.message and "\n" not in refused.value.message
    assert client.list() == [] and not (cli.home / "functions").exists()


@pytest.mark.parametrize(("keywords", "named"), [
    ({"num_procs_per_worker": -1}, "num_procs_per_worker=-1"),
    ({"num_procs_per_worker": "0"}, "num_procs_per_worker='0'"),
    ({"parameters": [1]}, "parameters=[1]"),
    ({"labels": {1: 2}}, "labels={1: 2}"),
    ({"annotations": {"a": None}}, "annotations={'a': None}"),
])
def test_compat_create_job_refuses_in_one_line(client, keywords, named):
    with pytest.raises(InvalidArgument) as refused:
        TrainingClient().create_job(name="compat", train_func=plain, **keywords)
    assert named in refused.value.message and "\n" not in refused.value.message
    assert client.list() == []


@pytest.mark.parametrize("selector", [5, ["a=b"], "-1", "a in ("])
def test_jobs_refuses_a_bad_selector_naming_the_keyword(client, selector):
    with pytest.raises(InvalidArgument, match=r"^selector") as refused:
        client.jobs(selector=selector)
    assert "--selector" not in refused.value.message


def test_numbers_still_pass_as_their_text(client):
    resource = client.run(plain, env={"LR": 0.5, "N": 3}, packages="numpy", dry_run=True)
    container = resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert {"name": "LR", "value": "0.5"} in container["env"] and {"name": "N", "value": "3"} in container["env"]


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: real, context: {cluster: c, user: u}}]
current-context: real
"""
NO_COMMAND = {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {"name": "bare"},
              "spec": {"jaxReplicaSpecs": {"Worker": {"replicas": 1, "template": {
                  "spec": {"containers": [{"name": "jax", "image": "python"}]}}}}}}


@pytest.mark.parametrize(("call", "named"), [
    (lambda client: client.run(["python", "-c", "pass"], framework="jax", name="once"), "replace=True"),
    (lambda client: list(client.job("once").logs(replica="master-0")), "replica 'master-0'"),
    (lambda client: client.wait("once", until="done"), "until 'done'"),
    (lambda client: Client("local", context="prod"), "backend='local' cannot be combined with context"),
    (lambda client: client.run(["python", "-c", "pass"], volume=["pvc:data:/data"], name="claim"),
     "volume=['host:/dir:/dir']"),
    (lambda client: client.run(["python", "-c", "pass"], framework="mpi", packages=["numpy"]), "packages"),
    (lambda client: client.submit(NO_COMMAND), "the command list"),
    (lambda client: Client("kubernetes", kubeconfig="kubeconfig", context="nope").jobs(), "context 'nope'"),
    (lambda client: client.run(["python", "-c", "pass"], workdir="missing"), "workdir 'missing'"),
])
def test_an_error_through_the_sdk_names_the_keyword_not_the_flag(client, cli, call, named):
    """Issue 23, defect 6: the Python API's errors name its keywords (the CLI's name its flags, below)."""
    (cli.cwd / "kubeconfig").write_text(KUBECONFIG)
    client.run(["python", "-c", "pass"], framework="jax", name="once").wait(timeout=60, progress=False)
    with pytest.raises(UserError) as refused:
        call(client)
    message = refused.value.message
    assert named in message and not re.search(r"(^|\W)--?[a-z]", message), message


def test_the_cli_still_names_its_flags(cli):
    for _ in range(2):
        done = cli("submit", "jax", "--name", "twice", "--", "python", "-c", "pass")
    assert done.returncode == 2 and "use --replace" in done.stderr, done.stderr
    assert "--local cannot be combined with --context" in cli("list", "--local", "--context", "x").stderr
