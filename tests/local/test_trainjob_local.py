"""The local backend runs a Trainer v2 TrainJob: ``trainctl apply -f`` a TrainJob with its runtime beside it, each node
a process with the env its pod would get (trainctl/core/trainjob.py), the TrainJob's own command.

The runtime is upstream's torch-distributed as it ships (../shared/kubeflow-trainer-v2/runtimes), the command
``torchrun train.py``: 2 nodes x 2 processes, a gloo all-reduce checked on every rank."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import REPO
from tests.local.test_function_jobs import needs
from trainctl.core.trainjob import TrainJob, plan

RUNTIMES = REPO.parent / "shared" / "kubeflow-trainer-v2" / "runtimes"

TRAIN = '''
import json, os
import torch, torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(total)
seen = {name: os.environ.get(name) for name in ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK",
        "PET_MASTER_ADDR", "PET_MASTER_PORT", "JOB_COMPLETION_INDEX", "FOO")}
print("RANK " + json.dumps({"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": total.item(),
      "local": int(os.environ["LOCAL_RANK"]), "env": seen}), flush=True)
dist.destroy_process_group()
'''


def trainjob_file(name: str, runtime: str, **trainer) -> str:
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
           "spec": {"runtimeRef": {"name": runtime}, "trainer": trainer}}
    return yaml.safe_dump(job) + "---\n" + (RUNTIMES / f"{runtime.replace('-', '_')}.yaml").read_text()


@pytest.mark.framework
@pytest.mark.timeout(180)
def test_a_torch_trainjob_of_two_nodes_by_two_processes_runs_with_torchrun(cli):
    needs("torch")
    (cli.cwd / "train.py").write_text(TRAIN)
    trainer = {"numNodes": 2, "numProcPerNode": 2, "command": ["torchrun", "train.py"],
               "env": [{"name": "FOO", "value": "bar"}]}
    (cli.cwd / "trainjob.yaml").write_text(trainjob_file("tj", "torch-distributed", **trainer))
    applied = cli("apply", "-f", "trainjob.yaml")
    assert applied.returncode == 0 and "applied trainjob/tj" in applied.stdout, applied.stderr
    waited = cli("wait", "tj", "--timeout", "150", timeout=170)
    assert waited.returncode == 0, waited.stdout + waited.stderr + cli("logs", "tj").stdout
    status = cli("status", "tj").stdout
    assert "tj-node-0-0   Succeeded" in status and "tj-node-0-1   Succeeded" in status, status

    lines = [line.split(" | ", 1) for line in cli("logs", "tj").stdout.splitlines() if " | RANK " in line]
    ranks = {json.loads(text.removeprefix("RANK "))["rank"]: (replica, json.loads(text.removeprefix("RANK ")))
             for replica, text in lines}
    assert sorted(ranks) == [0, 1, 2, 3], lines
    pods = plan(TrainJob(yaml.safe_load((cli.cwd / "trainjob.yaml").read_text().split("---")[0])),
                yaml.safe_load((RUNTIMES / "torch_distributed.yaml").read_text())).pods
    ports = set()
    for rank, (replica, seen) in ranks.items():
        assert (seen["world"], seen["sum"]) == (4, 10.0)  # 1+2+3+4 on every rank: the all-reduce went through all
        node = rank // 2  # torchrun gives node n the ranks 2n and 2n+1
        assert replica.strip() == f"node-0-{node}" and seen["local"] == rank % 2
        expected = pods[node].environment()  # what node n's pod gets, but the address: 127.0.0.1 and its own port
        assert expected["PET_MASTER_ADDR"] == "tj-node-0-0.tj" and expected["PET_MASTER_PORT"] == "29500"
        expected.update(PET_MASTER_ADDR="127.0.0.1", PET_MASTER_PORT=seen["env"]["PET_MASTER_PORT"])
        assert seen["env"] == {name: expected[name] for name in seen["env"]}
        assert seen["env"]["PET_NODE_RANK"] == seen["env"]["JOB_COMPLETION_INDEX"] == str(node)
        ports.add(seen["env"]["PET_MASTER_PORT"])
    assert len(ports) == 1 and ports.pop().isdigit()


@pytest.mark.timeout(120)
def test_a_trainjob_naming_a_default_runtime_runs_on_trainctls_own(cli):
    job = trainjob_file("alone", "jax-distributed", numNodes=2, env=[{"name": "FOO", "value": "bar"}],
                        command=["python", "-c", "import os; print('ID', os.environ['JAX_PROCESS_ID'], "
                                                 "os.environ['JAX_NUM_PROCESSES'], os.environ['FOO'])"])
    (cli.cwd / "alone.yaml").write_text(job.split("---")[0])  # the TrainJob alone
    assert cli("apply", "-f", "alone.yaml").returncode == 0
    assert cli("wait", "alone", "--timeout", "60").returncode == 0
    assert sorted(line for line in cli("logs", "alone").stdout.splitlines() if " | ID " in line) == [
        "node-0-0 | ID 0 2 bar", "node-0-1 | ID 1 2 bar"]
    snapshot = yaml.safe_load(cli("get", "alone", "-o", "yaml").stdout)["metadata"]["annotations"]
    assert json.loads(snapshot["trainctl.io/runtime-snapshot"])["metadata"]["name"] == "jax-distributed"


def test_a_trainjob_without_its_runtime_or_with_reserved_env_is_refused_in_one_line(cli):
    (cli.cwd / "alone.yaml").write_text(trainjob_file("alone", "torch-distributed", command=["torchrun", "x.py"])
                                        .split("---")[0].replace("name: torch-distributed", "name: my-runtime"))
    refused = cli("apply", "-f", "alone.yaml")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "ClusterTrainingRuntime 'my-runtime', which trainctl cannot find here: give that runtime in the same " \
           "file" in refused.stderr and "torch-distributed" in refused.stderr
    (cli.cwd / "reserved.yaml").write_text(trainjob_file("reserved", "torch-distributed", command=["torchrun", "x.py"],
                                                         env=[{"name": "PET_NNODES", "value": "3"}]))
    refused = cli("apply", "-f", "reserved.yaml")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "-f reserved.yaml: TrainJob 'reserved'" in refused.stderr and "sets PET_NNODES" in refused.stderr
    assert "reserved" not in cli("list").stdout


ALLREDUCE = '''
import json, os, sys
from mpi4py import MPI

world = MPI.COMM_WORLD
total = world.allreduce(world.Get_rank() + 1)
hostfile = os.environ["OMPI_MCA_orte_default_hostfile"]
print("RANK " + json.dumps({"rank": world.Get_rank(), "world": world.Get_size(), "sum": total,
      "env": os.environ["OMPI_COMM_WORLD_RANK"], "hostfile": hostfile, "lines": open(hostfile).read(),
      "argv": sys.argv[1:],
      "slots": os.environ["OMPI_MCA_orte_set_default_slots"]}), flush=True)
'''


def with_runtime(job_file: str, launcher_as_node: bool) -> str:
    """The file's TrainJob on upstream's runtime beside it, its mpi policy's runLauncherAsNode as given."""
    job, runtime = yaml.safe_load_all(job_file)
    runtime["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = launcher_as_node
    return yaml.safe_dump_all([job, runtime])


@pytest.mark.framework
@pytest.mark.timeout(240)
@pytest.mark.parametrize("runtime, launcher_as_node, procs, command, ranks", [
    # trainctl's own deepspeed-distributed, the TrainJob alone in its file: the launcher is node 0 of 2, 2 slots
    # each; mpirun finds the hostfile through the env (4 ranks on a 2-core machine only if it reads the hostfile)
    ("deepspeed-distributed", None, 2, ["mpirun", "-n", "4", "python", "allreduce.py", "x"], 4),
    # upstream's mlx-distributed given in the file, the launcher no node: 2 nodes x 2 slots, the SDK's form of the
    # command (no -n: as many ranks as the hostfile's slots)
    ("mlx-distributed", False, 2, ["mpirun", "--hostfile", "/etc/mpi/hostfile", "python", "allreduce.py",
                                   "--at=/etc/mpi/hostfile"], 4),
])
def test_an_mpi_trainjob_of_two_nodes_allreduces_with_the_local_hostfile(cli, runtime, launcher_as_node, procs,
                                                                          command, ranks):
    needs("mpi4py")
    (cli.cwd / "allreduce.py").write_text(ALLREDUCE)
    job_file = trainjob_file("mj", runtime, numNodes=2, numProcPerNode=procs, command=command)
    job_file = job_file.split("---")[0] if launcher_as_node is None else with_runtime(job_file, launcher_as_node)
    (cli.cwd / "mj.yaml").write_text(job_file)
    applied = cli("apply", "-f", "mj.yaml")
    assert applied.returncode == 0, applied.stderr
    waited = cli("wait", "mj", "--timeout", "200", timeout=220)
    logs = cli("logs", "mj").stdout
    assert waited.returncode == 0, waited.stdout + waited.stderr + logs
    status = cli("status", "mj").stdout
    assert "mj-launcher-0-0   Succeeded" in status, status
    lines = [line.split(" | ", 1) for line in logs.splitlines() if " | RANK " in line]
    seen = {json.loads(text.removeprefix("RANK "))["rank"]: (replica.strip(), json.loads(text.removeprefix("RANK ")))
            for replica, text in lines}
    assert sorted(seen) == list(range(ranks)), logs  # every rank ran once, all under the launcher's mpirun
    hostfile = str(cli.home / "jobs" / "default" / "mj" / "pod-files" / "launcher" / "etc" / "mpi" / "hostfile")
    for rank, (replica, found) in seen.items():
        assert replica == "launcher-0-0" and found["env"] == str(rank)
        assert (found["world"], found["sum"]) == (ranks, ranks * (ranks + 1) // 2)  # the all-reduce went through all
        # the plan's hostfile, its two node lines on one host: one line with their slots together
        assert (found["hostfile"], found["lines"]) == (hostfile, f"127.0.0.1 slots={ranks}\n")
        assert found["slots"] == str(procs)  # the plan's other OMPI_* as it gives them
        assert found["argv"] == [command[-1].replace("/etc/mpi/hostfile", hostfile)]  # a pod path: its local copy
    node = "mj-node-0-0" if launcher_as_node is None else "mj-node-0-1"
    assert node in status, status  # the node pods ran (idle: no sshd here) until the launcher finished
    assert "failed" not in status, status  # stopped at the job's end, as its cluster's pods are deleted: no failure


def test_an_mpi_trainjob_naming_its_hostfile_inside_a_script_is_refused_in_one_line(cli):
    script = "mpirun --hostfile /etc/mpi/hostfile python allreduce.py"
    (cli.cwd / "allreduce.py").write_text(ALLREDUCE)
    (cli.cwd / "mj.yaml").write_text(trainjob_file("mj", "deepspeed-distributed", numNodes=2,
                                                   command=["bash", "-c", script]).split("---")[0])
    refused = cli("apply", "-f", "mj.yaml")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"TrainJob mj: the launcher command names /etc/mpi/hostfile inside {script!r}" in refused.stderr
    assert "mj" not in cli("list").stdout


@pytest.mark.timeout(120)
def test_suspend_and_resume_a_trainjob_through_its_own_spec_suspend(cli):
    (cli.cwd / "sleeps.yaml").write_text(trainjob_file("sleeps", "torch-distributed", numNodes=2,
                                                       command=["python", "-c", "import time; time.sleep(100)"]))
    assert cli("apply", "-f", "sleeps.yaml").returncode == 0
    assert cli("wait", "sleeps", "--for", "Running", "--timeout", "60").returncode == 0
    assert cli("suspend", "sleeps").returncode == 0
    assert cli("wait", "sleeps", "--for", "Suspended", "--timeout", "60").returncode == 0
    stored = yaml.safe_load(cli("get", "sleeps", "-o", "yaml").stdout)
    assert stored["spec"]["suspend"] is True and "runPolicy" not in stored["spec"]  # the TrainJob's own field
    assert cli("resume", "sleeps").returncode == 0
    assert cli("wait", "sleeps", "--for", "Running", "--timeout", "60").returncode == 0
    assert cli("delete", "sleeps").returncode == 0
