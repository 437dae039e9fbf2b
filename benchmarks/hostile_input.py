"""How long trainctl takes to refuse hostile input (issue 13, class 5: "a one-line exit-2
error within 2 s for each").

    python -m benchmarks.hostile_input [--runs 5]

Each case is a new ``trainctl`` process on the local backend with a private state
directory, as a user would run it; the baseline is a legal ``submit --dry-run`` in the
same run. A case that does not end with exit status 2 and one line on stderr is
reported as "wrong exit" instead of a time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.record import Row, write_section

TARGET_S = 2.0
LAUGHS = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9))
FILES = {  # name -> content of a file the cases below read
    "laughs.yaml": LAUGHS + "env: *j\n",
    "deep.yaml": "env: " + "[" * 100_000 + "\n",
    "bigint.yaml": "workers: " + "9" * 4301 + "\n",
    "env20k.yaml": "env:\n" + "".join(f"  - K{i}=v\n" for i in range(20_000)),
    "latin1.yaml": "name: café\n".encode("latin-1"),
    "x": "",  # the legal job's script: its dry run checks, as the submit does, that it is there
}
SUBMIT = ["submit", "pytorch", "--dry-run"]
CASES = [  # (what, arguments, text on stdin)
    ("billion laughs, values file", [*SUBMIT, "-f", "laughs.yaml", "--", "x"], None),
    ("billion laughs, apply -f -", ["apply", "--dry-run", "-f", "-"], LAUGHS),
    ("100,000-deep nesting, values file", [*SUBMIT, "-f", "deep.yaml", "--", "x"], None),
    ("4301-digit integer, values file", [*SUBMIT, "-f", "bigint.yaml", "--", "x"], None),
    ("5000-digit integer, --set", [*SUBMIT, "--set", "spec.runPolicy.backoffLimit=" + "9" * 5000, "--", "x"], None),
    ("-f /dev/zero", [*SUBMIT, "-f", "/dev/zero", "--", "x"], None),
    ("apply -f /dev/zero", ["apply", "--dry-run", "-f", "/dev/zero"], None),
    ("20,000 env entries, values file", [*SUBMIT, "-f", "env20k.yaml", "--", "x"], None),
    ("latin-1 values file", [*SUBMIT, "-f", "latin1.yaml", "--", "x"], None),
    ("namespace ../../escape-dir", ["submit", "pytorch", "-n", "../../escape-dir", "--", "x"], None),
]


def time_case(argv: list[str], stdin: str | None, runs: int, cwd: Path, env: dict, expect: int) -> float | None:
    """Median wall seconds, or None when the exit status or the one-line promise is not kept."""
    samples = []
    for _ in range(runs + 1):  # the first run warms the page cache and is not counted
        start = time.perf_counter()
        result = subprocess.run(argv, input=stdin, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
        samples.append(time.perf_counter() - start)
        if result.returncode != expect or (expect == 2 and len(result.stderr.splitlines()) != 1):
            return None
    return statistics.median(samples[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        cwd = Path(scratch)
        for name, content in FILES.items():
            (cwd / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        env = {**os.environ, "TRAINCTL_HOME": str(cwd / "home"), "KUBECONFIG": "/nonexistent",
               "TRAINCTL_BACKEND": "local"}
        trainctl = [sys.executable, "-m", "trainctl"]
        legal = time_case([*trainctl, *SUBMIT, "--", "python", "x"], None, args.runs, cwd, env, expect=0)
        rows = [Row("legal submit --dry-run", legal, "s")]
        for what, arguments, stdin in CASES:
            seconds = time_case([*trainctl, *arguments], stdin, args.runs, cwd, env, expect=2)
            if seconds is None:
                rows.append(Row(what, float("nan"), "s", target=f"<= {TARGET_S:g} s", verdict="wrong exit"))
                continue
            rows.append(Row(what, seconds, "s", "legal submit --dry-run", seconds / legal, f"<= {TARGET_S:g} s",
                            "met" if seconds <= TARGET_S else "missed"))
    write_section("hostile-input", "Refusing hostile input", f"python -m benchmarks.hostile_input --runs {args.runs}",
                  rows, notes=f"Median of {args.runs} runs of a new process each, after one warm-up run; every "
                  "case must end with exit status 2 and one line on stderr.")
    for row in rows:
        print(f"{row.what:36s} {row.median * 1000:8.1f} ms  {row.verdict}")


if __name__ == "__main__":
    main()
