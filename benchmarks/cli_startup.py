"""How fast the CLI starts: `trainctl --help` against the bare interpreter, and against another version.

    python -m benchmarks.cli_startup [--runs 10]
    python -m benchmarks.cli_startup --before DIR [DIR ...] [--runs 15]

The baseline is `python -c pass` with the same interpreter, measured in the
same run, so the ratio shows what trainctl adds on top of Python's own start.
Target (issue 7): `trainctl --help` <= 150 ms median.

With ``--before DIR`` (a checkout of a version to compare with, e.g. ``git archive BASE | tar -x -C DIR``)
it times ``python -m trainctl --help`` and ``submit --help`` of this tree and of each DIR in the same run,
alternating one of each (A B A B ...), and records the median of the ratio taken pair by pair in the
redesign's section (issue 24: the CLI's start-up must not get slower).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.record import ROOT, Row, median, table, time_command, write_section

TARGET_S = 0.150


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--before", type=Path, nargs="+", help="checkouts of the versions to compare with")
    args = parser.parse_args()
    if args.before:
        compare([before.resolve() for before in args.before], args.runs)
        return

    entry = shutil.which("trainctl") or sys.argv[0]
    trainctl = [entry, "--help"] if shutil.which("trainctl") else [sys.executable, "-m", "trainctl", "--help"]
    bare = median(time_command([sys.executable, "-c", "pass"], args.runs))
    helps = median(time_command(trainctl, args.runs))
    submit_help = median(time_command([*trainctl[:-1], "submit", "--help"], args.runs))
    rows = [
        Row("python -c pass", bare, "s"),
        Row("trainctl --help", helps, "s", "python -c pass", helps / bare, "<= 0.150 s",
            "met" if helps <= TARGET_S else "missed"),
        Row("trainctl submit --help", submit_help, "s", "python -c pass", submit_help / bare),
    ]
    command = f"python -m benchmarks.cli_startup --runs {args.runs}"
    write_section("cli-startup", "CLI start-up", command, rows,
                  notes=f"Median of {args.runs} runs each, after one warm-up run.")
    for row in rows:
        print(f"{row.what:28s} {row.median * 1000:8.1f} ms" + (f"  ({row.ratio:.2f}x bare python)" if row.ratio else ""))


# both trees compiled alike: the warm-up runs write each one's bytecode, whatever the caller's environment says
COMPILING = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def seconds(tree: Path, args: list[str]) -> float:
    """One ``python -m trainctl ARGS`` whose ``trainctl`` is ``tree``'s: run from there, it comes first on sys.path."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "trainctl", *args], cwd=tree, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=COMPILING)
    return time.perf_counter() - start


def compare(befores: list[Path], runs: int) -> None:
    """This tree against each of ``befores``, pairs alternating, after two warm-up runs of each."""
    rows = []
    for before in befores:
        for args in (["--help"], ["submit", "--help"]):
            for _ in range(2):
                seconds(ROOT, args)
                seconds(before, args)
            pairs = [(seconds(ROOT, args), seconds(before, args)) for _ in range(runs)]
            ratio = statistics.median(after / earlier for after, earlier in pairs)
            what, baseline = f"trainctl {' '.join(args)}", f"{before.name}: trainctl {' '.join(args)}"
            rows += [Row(baseline, median([earlier for _, earlier in pairs]), "s"),
                     Row(what, median([after for after, _ in pairs]), "s", baseline, ratio, "<= 1.05x",
                         "met" if ratio <= 1.05 else "missed")]
    command = f"python -m benchmarks.cli_startup --runs {runs} --before {' '.join(b.name for b in befores)}"
    write_section("cli-startup-redesign", "Start-up across the structural redesign (issue 24)", command, rows,
                  notes=f"Each --before directory is `git archive COMMIT` of the commit it is named after. {runs} "
                        "pairs per command, each a run of this tree then one of the other's, after two warm-up runs "
                        "of each; the ratio is the median of the pairs' ratios (after/before), so a load that comes "
                        "and goes weighs on both sides alike.")
    print(table(rows))

if __name__ == "__main__":
    main()
