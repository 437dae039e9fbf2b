"""How fast the CLI starts: `trainctl --help` against the bare interpreter.

    python -m benchmarks.cli_startup [--runs 10]

The baseline is `python -c pass` with the same interpreter, measured in the
same run, so the ratio shows what trainctl adds on top of Python's own start.
Target (issue 7): `trainctl --help` <= 150 ms median.
"""

from __future__ import annotations

import argparse
import shutil
import sys

from benchmarks.record import Row, median, time_command, write_section

TARGET_S = 0.150


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()
