"""SDK keywords of the wrong type are refused before anything is created, in one line naming the keyword.

Each case was accepted before (issue 22, section 4): a value became its repr (``env={'A': None}`` ran with
``A=None``, ``packages=[None]`` as ``--pip=None``), a generator or async function was shipped and failed in
the replica, or the call ended in a traceback (``jobs(selector=5)``).
"""

from __future__ import annotations

import pytest

from trainctl import InvalidArgument
from trainctl.compat import TrainingClient


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
