"""A function job's prints stay whole lines when processes share one pipe, as torchrun's local ranks do.

PYTHONUNBUFFERED (which the operator's env sets) writes a print's text and its newline apart; two writers
on one pipe then splice lines (``rank 1 ... sum 10rank 0 ... sum 10``), about 1 line in 16 here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

WRITER = """
import os, sys
from trainctl.functions.runner import whole_lines
whole_lines()
for index in range(5000):
    print(f"process {os.getpid()} line {index} " + "x" * 50, flush=True)
    print(f"process {os.getpid()} error {index}", file=sys.stderr)
"""


def test_two_processes_on_one_pipe_never_splice_a_line():
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    read, write = os.pipe()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER], stdout=write, stderr=write, env=env)
               for _ in range(2)]
    os.close(write)
    with os.fdopen(read) as pipe:
        lines = pipe.read().splitlines()
    assert [writer.wait(timeout=60) for writer in writers] == [0, 0]
    whole = re.compile(r"process \d+ (line \d+ x{50}|error \d+)")
    assert len(lines) == 20000
    assert [line for line in lines if not whole.fullmatch(line)] == []
