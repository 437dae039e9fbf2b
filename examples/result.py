"""The one line every example prints last: proof that the collective ran.

    {"event": "result", "framework": "pytorch", "rank": 0, "world_size": 2,
     "allreduce_sum": 3.0, "model_hash": "9f2c..."}

``allreduce_sum`` is the framework's own all-reduce of (rank + 1) over all ranks, so a
world of N gives N(N+1)/2; ``model_hash`` is a SHA-256 of the final parameters, equal
on every rank only if training really was synchronised. Tests and humans read it from
``trainctl logs``.
"""

import hashlib
import json
import sys


def parameter_hash(arrays) -> str:
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(array.astype("float32").tobytes())
    return digest.hexdigest()


def report(framework: str, rank: int, world_size: int, allreduce_sum: float, model_hash: str, **extra) -> None:
    line = json.dumps({"event": "result", "framework": framework, "rank": rank, "world_size": world_size,
                       "allreduce_sum": float(allreduce_sum), "model_hash": model_hash, **extra})
    # one write: ranks that share a stdout (mpirun forwards them all to the launcher's) would otherwise
    # interleave, since print under PYTHONUNBUFFERED writes the text and its newline separately
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
