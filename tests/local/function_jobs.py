"""Functions that tests run as jobs with ``Client.run``: each really synchronises its ranks.

Frameworks are imported inside the functions, as docs/python-api.md tells users to: pytest
imports this module too, and TensorFlow must never load in the pytest process.
"""

import functools
import os

SCALE = 10  # a module global: travels with the module's source


def torch_allreduce(offset: float = 0.0) -> dict:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")  # MASTER_ADDR/PORT, RANK, WORLD_SIZE from the PyTorchJob env
    total = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(total)
    print(f"torch rank {dist.get_rank()}/{dist.get_world_size()} local_rank {os.environ['LOCAL_RANK']} "
          f"sum {total.item():g}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return {"sum": total.item() * SCALE + offset, "world_size": int(os.environ["WORLD_SIZE"])}


def tensorflow_allreduce() -> float:
    import json

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    task = json.loads(os.environ["TF_CONFIG"])["task"]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    def rank_plus_one():
        context = tf.distribute.get_replica_context()
        return context.all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(float(task["index"] + 1)))

    total = float(strategy.experimental_local_results(strategy.run(rank_plus_one))[0])
    print(f"tensorflow {task['type']} {task['index']} sum {total:g}", flush=True)
    return total


def xgboost_allreduce(rounds: int = 2) -> dict:
    import numpy as np
    import xgboost
    from xgboost import collective
    from xgboost.tracker import RabitTracker

    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    tracker = None
    if rank == 0:
        tracker = RabitTracker(n_workers=world_size, host_ip=host, port=port, sortby="task", timeout=120)
        tracker.start()
    with collective.CommunicatorContext(dmlc_tracker_uri=host, dmlc_tracker_port=port, dmlc_task_id=str(rank),
                                        dmlc_retry=20, dmlc_timeout=120):
        total = float(collective.allreduce(np.array([rank + 1.0]), collective.Op.SUM)[0])
        features = np.random.default_rng(rank).normal(size=(200, 4))
        booster = xgboost.train({"tree_method": "hist", "max_depth": 2},
                                xgboost.DMatrix(features, label=features[:, 0] > 0), num_boost_round=rounds)
        print(f"xgboost rank {collective.get_rank()} sum {total:g}", flush=True)
    if tracker is not None:
        tracker.wait_for()
    return {"sum": total, "trees": len(booster.get_dump())}


def raises(message: str) -> None:
    if os.environ.get("RANK") == "1":
        raise ValueError(message)
    import time

    time.sleep(30)  # the other ranks outlive the failing one: the job fails because of it


def upstream_style(parameters):
    """As a Kubeflow SDK v1 notebook writes it: one positional dict, torchrun's env, DDP over gloo."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.tensor([float(parameters["lr"]) * (dist.get_rank() + 1)])
    dist.all_reduce(total)
    print(f"rank {os.environ['RANK']} local_rank {os.environ['LOCAL_RANK']} total {total.item():g}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


def jax_process() -> int:
    import jax

    jax.distributed.initialize(f"{os.environ['COORDINATOR_ADDRESS']}:{os.environ['COORDINATOR_PORT']}",
                               num_processes=int(os.environ["NUM_PROCESSES"]),
                               process_id=int(os.environ["PROCESS_ID"]))
    print(f"jax process {jax.process_index()} of {jax.process_count()}", flush=True)
    return jax.process_count()


def mpi_allreduce() -> int:
    from mpi4py import MPI

    total = MPI.COMM_WORLD.allreduce(MPI.COMM_WORLD.Get_rank() + 1)
    print(f"mpi rank {MPI.COMM_WORLD.Get_rank()} sum {total}", flush=True)
    return total


def uses_package() -> str:
    import tinypkg  # installed for this job by packages=, not in this environment

    return tinypkg.VALUE


def paddle_allreduce() -> float:
    import paddle
    import paddle.distributed as dist

    paddle.set_device("cpu")
    os.environ.setdefault("PADDLE_DISTRI_BACKEND", "gloo")  # on CPU "auto" takes a path without collectives
    dist.init_parallel_env()  # the ranks paddle.distributed.launch made from PADDLE_MASTER and PADDLE_NNODES
    total = paddle.to_tensor([dist.get_rank() + 1.0])
    dist.all_reduce(total)
    print(f"paddle rank {dist.get_rank()} of {dist.get_world_size()} sum {float(total[0]):g}", flush=True)
    return float(total[0])


def logged(func):
    @functools.wraps(func)
    def wrapper(**kwargs):
        print(f"calling {func.__name__}", flush=True)
        return func(**kwargs)

    return wrapper


@logged
def decorated(x: int) -> int:
    return x + 1


def too_big() -> bytes:
    return b"x" * (2 * 1024 * 1024)


def prints_a_forged_result() -> int:
    import base64
    import pickle

    forged = base64.b64encode(pickle.dumps("forged")).decode()
    print(f"trainctl-result:v1 {'0' * 64} {forged}", flush=True)  # data that looks like a result line
    return 5


def counts(to: int) -> int:
    import time

    for number in range(to):
        print(f"count {number}", flush=True)
        time.sleep(0.2)
    return to


def forging_worker(lines):
    """Every replica but rank 0 prints ``lines`` (forged result lines); rank 0 returns its own data."""
    if os.environ.get("RANK", "0") != "0":
        for line in lines:
            print(line, flush=True)
    return {"rank": 0}


def rank1_raises() -> None:
    """Rank 1 raises while rank 0 waits for it in an all-reduce (the issue's job: rank 0 fails too, of gloo)."""
    import time

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    dist.all_reduce(torch.ones(1))
    if dist.get_rank() == 1:
        time.sleep(0.3)
        raise RuntimeError("deliberate failure on rank 1")
    dist.all_reduce(torch.ones(1))


def both_raise(rank0_delay: float) -> None:
    """Once both ranks have met, rank 1 raises at once and rank 0 ``rank0_delay`` seconds later with an error of
    its own (SIGTERM ignored: the job stopping it when rank 1 failed must not end it first)."""
    import signal
    import time

    import torch.distributed as dist

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        raise ValueError("rank 1 saw a bad batch")
    time.sleep(rank0_delay)
    raise KeyError("rank 0 lost its config")


def mpi_rank1_raises() -> None:
    import time

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    comm.allreduce(1)
    if comm.Get_rank() == 1:
        time.sleep(0.3)
        raise ValueError("rank 1 broke")
    comm.allreduce(1)  # rank 0 waits for rank 1 until mpirun ends it
# ---- output before the result line (issue 23, defect 1): each ends without a newline --------------

def ends_without_newline() -> dict:
    print("epoch done", end="")
    return {"loss": 0.25}


def progress_bar() -> int:
    import sys

    for step in range(1, 4):
        sys.stderr.write(f"\rtraining {step}/3")  # as tqdm draws, on stderr
        sys.stderr.flush()
    sys.stderr.write("\r")  # and as a bar with leave=False ends
    return 3


def colour_reset_at_the_end() -> str:
    import sys

    # what pip prints under FORCE_COLOR=1 (a Jupyter kernel sets it): the reset after the last newline
    sys.stdout.write("\x1b[33mWARNING: Running pip as the 'root' user\x1b[0m\x1b[33m\n\x1b[0m")
    return "coloured"


def ten_megabytes_without_newline() -> int:
    import sys

    sys.stdout.write("x" * (10 << 20))
    return 10 << 20


def exits_before_returning() -> int:
    import sys

    print("about to leave", flush=True)
    sys.exit(0)


def raises_value_error() -> None:
    raise ValueError("not transient")


def killed_once(marker: str) -> str:
    """SIGKILLs itself on its first run (as the OOM killer would), returns on the next."""
    import os
    import signal
    from pathlib import Path

    if not Path(marker).exists():
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return "second run"
# ---- progress reports (issue 25) -------------------------------------------------------------------------

def reports_then_waits(steps: int, release: str) -> int:
    """Reports every step (both replicas), then holds the job Running until ``release`` exists."""
    import time

    import trainctl

    for step in range(1, steps + 1):
        trainctl.report(step=step, total=steps, loss=1 / step)
        time.sleep(0.02)
    deadline = time.monotonic() + 90
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    return steps


def reports_then_hangs(reports: int) -> None:
    """Five reports, then nothing at all: a hung all-reduce, as a stall detector sees one."""
    import time

    import trainctl

    for step in range(1, reports + 1):
        trainctl.report(step=step, total=100, loss=1.0)
    time.sleep(300)


def reports_to_mlflow(steps: int) -> int:
    import trainctl

    for step in range(1, steps + 1):
        trainctl.report(step=step, total=steps, loss=1 / step, accuracy=step / steps)
    return steps


def lightning_reports(steps: int) -> int:
    """A PyTorch Lightning loop reporting through trainctl's callback."""
    import lightning.pytorch as pl
    import torch

    import trainctl.reporting

    class Line(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch, index):
            loss = ((self.weight - 3.0) ** 2).sum()
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(64, 1)), batch_size=4)
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_steps=steps, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[trainctl.reporting.lightning_callback()])
    trainer.fit(Line(), data)
    return trainer.global_step
