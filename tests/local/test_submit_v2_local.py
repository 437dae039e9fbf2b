"""``trainctl submit --api v2`` and ``Client.run(api="v2")`` on the local backend (issue 41, points 3 and 4): the
TrainJob submit renders runs on trainctl's built-in torch-distributed runtime, each node a process with the env its
pod would get, the command under torchrun (v2 sets PET_*, torchrun the MASTER_ADDR, RANK and WORLD_SIZE it reads);
a function comes back as rank 0's value, as on the v1 path. Each really all-reduces over gloo."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.local import function_jobs
from tests.local.test_function_jobs import needs, texts
from tests.local.test_progress import wait_until

pytestmark = [pytest.mark.framework, pytest.mark.timeout(120)]

TRAIN = '''
import json, os
import torch, torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(total)
print("RANK " + json.dumps({"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": total.item(),
      "nodes": os.environ["PET_NNODES"], "node": os.environ["PET_NODE_RANK"]}), flush=True)
dist.barrier()
dist.destroy_process_group()
'''


def test_submit_api_v2_runs_a_two_node_torch_trainjob(cli):
    needs("torch")
    (cli.cwd / "train.py").write_text(TRAIN)
    submitted = cli("submit", "--api", "v2", "pytorch", "--workers", "2", "--name", "sv", "--wait", "--", "python",
                    "train.py", timeout=110)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr + cli("logs", "sv").stdout
    assert "submitted trainjob/sv (2 nodes x 1 process)" in submitted.stdout
    job = yaml.safe_load(cli("get", "sv", "-o", "yaml").stdout)
    assert (job["kind"], job["spec"]["runtimeRef"]["name"]) == ("TrainJob", "torch-distributed")
    lines = [line.split(" | RANK ", 1) for line in cli("logs", "sv").stdout.splitlines() if " | RANK " in line]
    seen = {replica.strip(): json.loads(text) for replica, text in lines}
    assert seen == {f"node-0-{rank}": {"rank": rank, "world": 2, "sum": 3.0, "nodes": "2", "node": str(rank)}
                    for rank in (0, 1)}, lines


def test_run_api_v2_returns_rank_0s_value_and_delete_removes_the_functions_files(client, cli):
    needs("torch")
    job = client.run(function_jobs.torch_allreduce, args={"offset": 0.5}, framework="pytorch", workers=2,
                     api="v2", name="fn-v2")
    assert job.kind == "TrainJob"
    assert job.result(timeout=100) == {"sum": 30.5, "world_size": 2}  # (1 + 2) * SCALE + offset, from rank 0
    lines = texts(job)
    for replica, rank in (("node-0-0", 0), ("node-0-1", 1)):
        assert f"{replica} | torch rank {rank}/2 local_rank 0 sum 3" in lines, lines
    assert len(list((cli.home / "functions").iterdir())) == 1
    job.delete()
    assert list((cli.home / "functions").iterdir()) == []


def test_run_api_v2_shows_live_progress_of_every_node(client, cli):
    needs("torch")  # torchrun starts each node's runner
    release = cli.cwd / "release"
    job = client.run(function_jobs.reports_then_waits, args={"steps": 10, "release": str(release)}, workers=2,
                     api="v2", name="fn-v2-steps")
    status = wait_until(lambda: cli("status", "fn-v2-steps"), lambda r: "progress: 10/10 (100%)" in r.stdout)
    assert "trainjob/fn-v2-steps in default on local: Running" in status.stdout, status.stdout  # live, while it runs
    progress = job.progress()
    assert (progress.step, progress.total, progress.metrics) == (10, 10, {"loss": 1 / 10})
    assert [replica.replica for replica in progress.replicas] == ["node-0-0", "node-0-1"]  # each node reported
    release.touch()
    assert job.result(timeout=60) == 10
