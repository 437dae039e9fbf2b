"""The Python SDK on the real node (issue 16): a function whose module the image lacks runs in pods
and rank 0's return value comes back through ``job.result()``."""

from __future__ import annotations

import importlib

import pytest

from tests.realnode.conftest import JOB_TIMEOUT_S

pytestmark = pytest.mark.realnode

MODULE = '''\
import os


def allreduce_ranks(scale):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    print("rank", dist.get_rank(), "of", dist.get_world_size(), "total", total.item(), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return {"total": total.item() * scale, "host": os.environ["HOSTNAME"]}
'''


def test_a_function_runs_in_pods_and_its_result_comes_back(real_node, in_cluster_controller, namespace, python_image,
                                                           tmp_path, monkeypatch):
    from trainctl import Client

    (tmp_path / "realnode_sdk_module.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)  # the user's project directory: what travels with the function
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("realnode_sdk_module")

    client = Client("kubernetes", kubeconfig=str(real_node.kubeconfig))
    job = client.run(module.allreduce_ranks, args={"scale": 10}, framework="pytorch", workers=3,
                     image=python_image, namespace=namespace, name="sdk")
    job.wait(timeout=JOB_TIMEOUT_S, progress=False)
    assert job.result() == {"total": 60.0, "host": "sdk-master-0"}
    printed = "".join(line.text for line in job.logs(follow=True))
    for rank in range(3):
        assert f"rank {rank} of 3 total 6.0" in printed, printed


NOISY_MODULE = '''\
import sys


def noisy(pattern):
    """Rank 0's output before its result ends without a newline, as issue 23's defect 1 found it."""
    if pattern == "end":
        print("epoch done", end="")
    elif pattern == "bar":
        for step in range(1, 4):
            sys.stderr.write(f"\\rtraining {step}/3")
        sys.stderr.write("\\r")
    elif pattern == "colour":
        sys.stdout.write("\\x1b[33mWARNING: Running pip as the 'root' user\\x1b[0m\\x1b[33m\\n\\x1b[0m")
    elif pattern == "ten-megabytes":
        sys.stdout.write("x" * (10 << 20))
    return {"pattern": pattern}
'''


@pytest.mark.parametrize("pattern", ["end", "bar", "colour", "ten-megabytes"])
def test_a_result_survives_output_without_a_final_newline_in_pods(real_node, in_cluster_controller, namespace,
                                                                  python_image, tmp_path, monkeypatch, pattern):
    from trainctl import Client

    (tmp_path / "realnode_noisy_module.py").write_text(NOISY_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("realnode_noisy_module")

    client = Client("kubernetes", kubeconfig=str(real_node.kubeconfig))
    job = client.run(module.noisy, args={"pattern": pattern}, framework="pytorch", workers=1,
                     image=python_image, namespace=namespace, name=f"noisy-{pattern}")
    assert job.result(wait=True) == {"pattern": pattern}
