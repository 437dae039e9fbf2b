"""PaddlePaddle training in a PaddleJob with a Master and a Worker, started through paddle.distributed.launch
with the operator's env (the real-node test ships it with the job, beside examples/result.py).

With a Master the operator's env is parameter-server mode: PADDLE_SERVER_NUM=1 on the Master's pod,
PADDLE_TRAINER_NUM=1 on the Workers', PADDLE_MASTER at the Master. From it the launcher starts on every
pod one server and one trainer process, and wires the trainers' gloo collective through the first
server (PADDLE_GLOO_HTTP_ENDPOINT). The parameter server itself needs a Paddle built with it (the CPU
wheel on PyPI has no PSCORE: fleet's PS optimizer fails on ``CommContext``), so here the trainers, one
in each pod, average their gradients through that collective, and the servers hold its rendezvous store.

The launcher shows only its first process's output, the server's, so each server prints its pod's
trainer's result line (from the launcher's workerlog.0) and marks it printed; each trainer waits for
that mark, then for the other trainer, before it exits: the job succeeds with its Master's pod, and by
then both pods have printed their result.
"""

import os
import sys
import time
from pathlib import Path

import numpy as np
import paddle
import paddle.distributed.fleet as fleet

sys.path.insert(0, str(Path(__file__).resolve().parent))
from result import parameter_hash, report  # noqa: E402

RESULT_PREFIX = '{"event": "result"'
WAIT_S = 600
LOG_DIR = Path(os.environ.get("PADDLE_LOG_DIR", "log"))  # the launcher's, shared by the pod's two processes
TRAINER_LOG = LOG_DIR / "workerlog.0"
PRINTED = LOG_DIR / "result-printed"


def main() -> None:
    paddle.enable_static()  # fleet's parameter-server mode is set up from the static graph
    fleet.init()
    paddle.disable_static()
    if fleet.is_server():
        PRINTED.unlink(missing_ok=True)  # a mark left by this pod's previous run
        print(wait_for(trainer_result, "this pod's trainer to print its result"), flush=True)
        PRINTED.touch()
    else:
        train()
        wait_for(PRINTED.exists, "this pod's server to print the result")
        fleet.util.barrier("worker")


def train() -> None:
    rank, world_size = fleet.worker_index(), fleet.worker_num()
    total = fleet.util.all_reduce(np.array([float(rank + 1)]), "sum", "worker")
    paddle.seed(0)
    model = paddle.nn.Linear(8, 1)
    rng = np.random.default_rng(rank)
    for _ in range(5):
        features = paddle.to_tensor(rng.normal(size=(64, 8)).astype("float32"))
        loss = paddle.nn.functional.mse_loss(model(features), features.sum(axis=1, keepdim=True))
        loss.backward()
        for parameter in model.parameters():  # data parallel: every trainer applies the mean gradient
            mean = fleet.util.all_reduce(parameter.grad.numpy(), "sum", "worker") / world_size
            parameter.set_value((parameter.numpy() - 0.05 * mean).astype("float32"))
            parameter.clear_gradient()
    report("paddle", rank, world_size, float(total[0]), parameter_hash([p.numpy() for p in model.parameters()]),
           pod="master" if "PADDLE_SERVER_NUM" in os.environ else "worker")


def trainer_result() -> str | None:
    if not TRAINER_LOG.is_file():
        return None
    return next((line for line in reversed(TRAINER_LOG.read_text().splitlines()) if line.startswith(RESULT_PREFIX)),
                None)


def wait_for(check, what: str):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise SystemExit(f"waited {WAIT_S} s for {what}")


if __name__ == "__main__":
    main()
