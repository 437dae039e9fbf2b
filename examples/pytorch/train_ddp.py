"""PyTorch DDP on synthetic MNIST-shaped data: runs unchanged under trainctl (local or pod) and torchrun.

Strong scaling: --global-batch is split across the ranks and DDP averages the gradients,
so the same global step happens whatever the world size. Rank 0 saves the model.

    trainctl submit pytorch --workers 2 -- python examples/pytorch/train_ddp.py --epochs 1
"""

import argparse
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from result import parameter_hash, report  # noqa: E402


def synthetic_mnist(samples: int) -> TensorDataset:
    """Images 1x28x28 with labels from a fixed random teacher, identical on every rank (seeded)."""
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(samples, 1, 28, 28, generator=generator)
    teacher = torch.randn(28 * 28, 10, generator=generator)
    labels = (images.flatten(1) @ teacher).argmax(dim=1)
    return TensorDataset(images, labels)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--global-batch", type=int, default=128)
    parser.add_argument("--output", default="output")
    args = parser.parse_args()

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    cuda = torch.cuda.is_available()
    if distributed:
        dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank() if distributed else 0
    world_size = dist.get_world_size() if distributed else 1
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu")

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    if distributed:
        model = DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    dataset = synthetic_mnist(args.samples)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.global_batch // world_size, sampler=sampler, drop_last=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    steps, started = 0, time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(images.to(device)), labels.to(device))
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)
    elapsed = time.perf_counter() - started

    total = torch.tensor([float(rank + 1)], device=device)
    if distributed:
        dist.all_reduce(total)
    params = [p.detach().cpu().numpy() for p in model.parameters()]
    if rank == 0:
        Path(args.output).mkdir(parents=True, exist_ok=True)
        state = model.module.state_dict() if distributed else model.state_dict()
        torch.save(state, Path(args.output) / "model.pt")
    report("pytorch", rank, world_size, total.item(), parameter_hash(params),
           steps=steps, steps_per_second=round(steps / elapsed, 2), samples_per_second=round(steps * args.global_batch / elapsed, 1))
    if distributed:
        # Rank 0 hosts the rendezvous store: a rank still tearing down when it exits aborts (exit 134)
        # after its work is done, and its restart then waits for a master that is gone.
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
