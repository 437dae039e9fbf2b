"""PaddlePaddle collective (data-parallel) training, started through paddle.distributed.launch.

The PaddleJob env (PADDLE_MASTER, PADDLE_NNODES, PADDLE_JOB_ID) is read by the launch
module, which starts this script as the trainer with PADDLE_TRAINER_* set:

    trainctl submit paddle --workers 2 -- python -m paddle.distributed.launch examples/paddle/train_collective.py
"""

import os
import sys
from pathlib import Path

import numpy as np
import paddle
import paddle.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from result import parameter_hash, report  # noqa: E402


def main() -> None:
    on_gpu = paddle.is_compiled_with_cuda() and bool(os.environ.get("CUDA_VISIBLE_DEVICES"))
    paddle.set_device("gpu" if on_gpu else "cpu")
    if not on_gpu:
        # without it Paddle's "auto" backend takes a legacy CPU path whose collectives are not initialised
        os.environ.setdefault("PADDLE_DISTRI_BACKEND", "gloo")
    dist.init_parallel_env()
    rank, world_size = dist.get_rank(), dist.get_world_size()
    total = paddle.to_tensor([float(rank + 1)])
    dist.all_reduce(total)

    paddle.seed(0)
    model = paddle.DataParallel(paddle.nn.Linear(8, 1))
    optimizer = paddle.optimizer.SGD(learning_rate=0.05, parameters=model.parameters())
    rng = np.random.default_rng(rank)
    for _ in range(5):
        features = paddle.to_tensor(rng.normal(size=(64, 8)).astype("float32"))
        target = features.sum(axis=1, keepdim=True)
        loss = paddle.nn.functional.mse_loss(model(features), target)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
    report("paddle", rank, world_size, float(total.numpy()[0]), parameter_hash([p.numpy() for p in model.parameters()]))


if __name__ == "__main__":
    main()
