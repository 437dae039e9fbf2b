"""Shared plumbing for benchmark scripts: timing, medians and the results record.

Every benchmark prints a table and rewrites its own section of
docs/benchmarks.md (between ``<!-- bench:NAME -->`` markers), with the
machine, the command, the date, the medians and the ratio against the
baseline measured in the same run: absolute times on a shared machine are
noisy, ratios taken side by side are not.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "benchmarks.md"


@dataclass
class Row:
    what: str
    median: float
    unit: str
    baseline: str = ""
    ratio: float | None = None
    target: str = ""
    verdict: str = ""


def time_command(argv: list[str], runs: int, env: dict | None = None, warmup: int = 1) -> list[float]:
    """Wall seconds of ``runs`` executions of argv (after ``warmup`` untimed ones)."""
    samples = []
    for i in range(warmup + runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        if i >= warmup:
            samples.append(time.perf_counter() - start)
    return samples


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
        cpu = model
    except (OSError, StopIteration):
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB, Python {platform.python_version()}, {platform.system()}"


def table(rows: list[Row]) -> str:
    lines = ["| measurement | median | baseline (same run) | ratio | target | verdict |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else ""
        lines.append(f"| {r.what} | {r.median:.3f} {r.unit} | {r.baseline} | {ratio} | {r.target} | {r.verdict} |")
    return "\n".join(lines)


def write_section(name: str, title: str, command: str, rows: list[Row], notes: str = "") -> None:
    """Replace (or append) the section ``name`` of docs/benchmarks.md."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = (f"<!-- bench:{name} -->\n## {title}\n\n"
            f"- machine: {machine()}\n- command: `{command}`\n- date: {stamp}\n\n"
            f"{table(rows)}\n" + (f"\n{notes.strip()}\n" if notes else "") + f"<!-- /bench:{name} -->")
    text = RECORD.read_text() if RECORD.exists() else "# Benchmarks\n\nResults written by the scripts in benchmarks/.\n"
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    text = pattern.sub(lambda _: body, text) if pattern.search(text) else text.rstrip() + "\n\n" + body + "\n"
    RECORD.parent.mkdir(exist_ok=True)
    RECORD.write_text(text)


def installed_trainctl(work: Path) -> str:
    """``trainctl`` installed as ``pip install .`` installs it (a wheel, byte-compiled, no editable finder), into a
    new virtual environment under ``work`` that borrows this one's dependencies: the command a user runs.

    The development venv's editable install adds its import hook to every Python start (about 10 ms); a user's
    installed copy has none, so a benchmark of start-up times that copy. Returns the console script's path."""
    venv = work / "installed"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                    str(site), str(ROOT)], check=True, capture_output=True)
    dependencies = next(path for path in map(Path, sys.path) if path.name == "site-packages" and path.is_dir())
    (site / "dependencies.pth").write_text(f"{dependencies}\n")  # typer, rich, PyYAML, Jinja2: this venv's
    script = venv / "bin" / "trainctl"  # what pip writes for [project.scripts]
    script.write_text(f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom trainctl.cli.fast import main\n"
                      "if __name__ == '__main__':\n    sys.exit(main())\n")
    script.chmod(0o755)
    return str(script)


def interleaved(commands: dict[str, list[str]], runs: int, env: dict | None = None, warmup: int = 1) -> dict:
    """Wall seconds of each command's ``runs`` runs, taken in turn (A B C A B C ...) after ``warmup`` rounds,
    so drift on a shared machine hits every command alike: ``{name: [seconds, ...]}``."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(warmup + runs):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            if round_ >= warmup:
                samples[name].append(time.perf_counter() - start)
    return samples


def built_kubectl() -> Path:
    """kubectl as scripts/build-node.sh builds it, from the API server's own source (not whatever is on PATH)."""
    from tests.cluster.server import SOURCE_VERSION

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "trainctl" / "node" / SOURCE_VERSION / "kubectl"
