"""Code travels (issue 15) on the real node: a script and the module it imports run in pods of an
image that holds neither, unpacked from the job's ConfigMaps by the init container."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.realnode.conftest import JOB_TIMEOUT_S
from tests.realnode.test_training import results

pytestmark = pytest.mark.realnode

TRAIN = '''\
import json
import os

import torch
import torch.distributed as dist

from helper import rank_plus_one

dist.init_process_group("gloo")
total = torch.tensor([rank_plus_one()])
dist.all_reduce(total)
print(json.dumps({"event": "result", "rank": dist.get_rank(), "allreduce_sum": total.item(),
                  "cwd": os.getcwd()}), flush=True)
dist.barrier()
dist.destroy_process_group()
'''
HELPER = '''\
import os


def rank_plus_one() -> float:
    return float(os.environ["RANK"]) + 1
'''


def snapshot_configmaps(real_node, namespace: str) -> list[str]:
    listed = real_node.kubectl("get", "configmaps", "-n", namespace, "-l", "trainctl.io/code-snapshot", "-o", "json")
    return sorted(item["metadata"]["uid"] for item in json.loads(listed.stdout)["items"])


def test_a_script_and_its_helper_module_travel_to_three_pods_and_are_uploaded_once(
        real_node, trainctl, namespace, python_image, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "helper.py").write_text(HELPER)
    project = dataclasses.replace(trainctl, cwd=tmp_path)  # run from the user's project directory
    first = project("submit", "pytorch", "--name", "shipped", "-n", namespace, "--workers", "3",
                    "--image", python_image, "--", "python3", "train.py")
    assert first.returncode == 0, first.stderr
    assert "2 files" in first.stdout + first.stderr, first.stdout + first.stderr
    waited = project("wait", "shipped", "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    found = results(project("logs", "shipped", "-n", namespace).stdout)
    assert sorted(record["rank"] for record in found) == [0, 1, 2], found
    assert {record["allreduce_sum"] for record in found} == {6.0}
    assert {record["cwd"] for record in found} == {"/workspace"}
    uploaded = snapshot_configmaps(real_node, namespace)
    assert uploaded

    second = project("submit", "pytorch", "--name", "shipped-again", "-n", namespace, "--workers", "3",
                     "--image", python_image, "--", "python3", "train.py")
    assert second.returncode == 0, second.stderr
    assert snapshot_configmaps(real_node, namespace) == uploaded  # unchanged code: nothing new created
