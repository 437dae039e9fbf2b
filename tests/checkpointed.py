"""A plain DDP training script that checkpoints with trainctl's API, for the restart and preemption tests
(tests/local/test_restarts.py, tests/realnode/test_restarts.py): what docs/fault-tolerance.md tells a user to write.

Every rank trains a tiny model for STEPS steps (gloo on CPU), saves its own ``torch.save`` file into
``trainctl.checkpoint_path(step)`` every CHECKPOINT_EVERY steps and marks it complete; on start it loads
``trainctl.latest_checkpoint()``. SIGTERM (a suspend, a deleted pod) is agreed on by all ranks at the next
step, which they save, then exit 143. Each rank reports its step and loss (``trainctl.report``). Each rank prints what a test asserts, and appends it to
``events-rank<R>.log`` in its checkpoint directory (a pod's output goes with the pod; that directory stays):
``rank R attempt A start step S``, ``... saved step N``, ``... done step N``. The fault to inject comes from the
environment: ``KILL_AT=25`` (rank 1 SIGKILLs itself at that step, on attempt 0 only), ``HALF_WRITE_AT=30``
(rank 1 dies half-way through writing that step's checkpoint, unmarked, on attempt 0), ``STEP_SECONDS`` (the
pause of each step of attempt 0; later attempts pause 0.02 s).
"""

SCRIPT = r'''
import os, signal, sys, time
import torch
import torch.distributed as dist
import trainctl

STEPS, EVERY = int(os.environ.get("STEPS", "60")), int(os.environ.get("CHECKPOINT_EVERY", "10"))
KILL_AT, HALF_AT = int(os.environ.get("KILL_AT", "0")), int(os.environ.get("HALF_WRITE_AT", "0"))

trainctl.preempting()  # arm the notice: SIGTERM becomes a request to save and stop
dist.init_process_group("gloo")
rank, attempt = dist.get_rank(), trainctl.restart_attempt()
# STEP_SECONDS paces the first attempt, which a test interrupts mid-run; nothing interrupts a later one, which only
# has to finish (at the pace of the first, the 40 steps after a restart at step 20 took 16 s of each test)
PAUSE = float(os.environ.get("STEP_SECONDS", "0.02")) if attempt == 0 else 0.02
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

start = 0
latest = trainctl.latest_checkpoint()
if latest is not None:
    state = torch.load(latest / f"rank-{rank}.pt")
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    start = state["step"]


def say(text):
    line = f"rank {rank} attempt {attempt} {text}"
    print(line, flush=True)
    with open(trainctl.checkpoint_dir() / f"events-rank{rank}.log", "a") as events:
        events.write(line + "\n")


say(f"start step {start} pid {os.getpid()}")


def save(step, half=False):
    path = trainctl.checkpoint_path(step)
    state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
    if half:  # what a rank leaves when it dies while writing: part of a file, no marker
        (path / f"rank-{rank}.pt").write_bytes(b"half a checkpoint")
        os.kill(os.getpid(), signal.SIGKILL)
    torch.save(state, path / f"rank-{rank}.pt")
    trainctl.checkpoint_complete(path)


for step in range(start + 1, STEPS + 1):
    inputs = torch.randn(16, 8)
    loss = model(inputs).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    trainctl.report(step=step, total=STEPS, loss=loss.item())
    time.sleep(PAUSE)
    if rank == 1 and attempt == 0 and step == KILL_AT:
        say(f"killing itself at step {step}")
        os.kill(os.getpid(), signal.SIGKILL)
    stopping = torch.tensor([1.0 if trainctl.preempting() else 0.0])
    dist.all_reduce(stopping, op=dist.ReduceOp.MAX)  # every rank saves the same step
    if step % EVERY == 0 or stopping.item():
        save(step, half=rank == 1 and attempt == 0 and step == HALF_AT)
        say(f"saved step {step}")
    if stopping.item():
        say(f"preempted at step {step}")
        sys.exit(trainctl.PREEMPTED_EXIT)
say(f"done step {STEPS}")
dist.destroy_process_group()
'''

# rank 1 (the worker) exits with CODE on every attempt, after saying so; rank 0 waits until it is stopped
EXITS = r'''
import os, sys, time
import trainctl
rank, attempt = os.environ["RANK"], trainctl.restart_attempt()
print(f"rank {rank} attempt {attempt} start", flush=True)
with open(os.environ["STARTS"], "a") as starts:
    starts.write(f"{rank} {attempt}\n")
if rank == "1":
    time.sleep(0.3)
    if os.environ.get("RAISE"):
        raise ValueError("a bug, the same on every attempt")
    sys.exit(int(os.environ["CODE"]) if attempt == 0 or not os.environ.get("ONCE") else 0)
# WAIT: until stopped; ONCE: the first attempt's rank 0 waits for the restart, the next one's ends after a moment
time.sleep(3600 if os.environ.get("WAIT") or (os.environ.get("ONCE") and attempt == 0) else 1)
'''


def saved(text: str, attempt: int) -> list[int]:
    """The steps a rank's ``saved step`` lines of ``attempt`` name, in order."""
    return [int(line.split()[-1]) for line in text.splitlines()
            if f"attempt {attempt} saved step " in line]


def started(text: str) -> list[tuple[int, int, int]]:
    """(rank, attempt, step) of each ``start`` line of the script's output."""
    found = []
    for line in text.splitlines():
        words = line.split("| ", 1)[-1].split()
        if len(words) >= 6 and words[0] == "rank" and words[4] == "start" and words[5] == "step":
            found.append((int(words[1]), int(words[3]), int(words[6])))
    return found
