"""Issue 54, class 2, as a user met it: a replica's progress bar (one line of carriage-return updates, longer than
a chunk, written over more than a second) broke ``logs --tail 1``, ``status``, ``wait`` and ``export``; a 20 MiB line
was printed whole by ``status``, ``wait`` and ``failure.txt``. Each now reads and shows such a line bounded, and says
it was cut."""

from __future__ import annotations

import pytest

from trainctl.backends.local.logs import LINE_CUT
from trainctl.sdk.failures import LOG_LINE_CHARS

pytestmark = pytest.mark.timeout(120)

# a bar of 1.5 MiB written over ~2.5 s (the supervisor notes the log's size once a second: the line spans entries),
# then a 20 MiB line and a last one
SCRIPT = r"""
import sys, time
for step in range(25):
    sys.stdout.write("".join(f"\r{step:3d}%|{'#' * 40}| {part}/4000" for part in range(1000)))
    sys.stdout.flush()
    time.sleep(0.1)
sys.stdout.write("\r100%|done\n")
sys.stdout.write("y" * (20 << 20) + "\n")
print("the last line", flush=True)
sys.exit(1)
"""
MARK = LINE_CUT.decode().rstrip("\n")  # what ends a line cut to its last MiB
CUT = f"    | {'y' * LOG_LINE_CHARS}... ["  # a log tail's line cut, then how much was cut


def test_a_progress_bar_and_a_huge_line_are_read_and_shown_bounded(cli):
    (cli.cwd / "long.py").write_text(SCRIPT)
    (cli.cwd / "values.yaml").write_text('image: "img\\e[31mred"\n')  # issue 54, class 3: an ESC in a values file
    submitted = cli("submit", "pytorch", "--name", "long", "--workers", "1", "--restart-policy", "Never", "--wait",
                    "-f", "values.yaml", "--", "python", "long.py")
    assert submitted.returncode == 1, submitted.stderr[-2000:]
    assert "the image (img^[[31mred) is not used" in submitted.stdout and "\x1b" not in submitted.stdout
    tail = cli("logs", "long", "--tail", "1")
    assert (tail.returncode, tail.stdout) == (0, "master-0 | the last line\n"), tail.stderr[-2000:]
    logs = cli("logs", "long")
    assert logs.returncode == 0, logs.stderr[-2000:]
    # (read as text, the bar's carriage returns came as newlines)
    assert len(logs.stdout) < 3 << 20
    assert logs.stdout.count(MARK) == 2 and f"100%|done{MARK}\nmaster-0 | yyy" in logs.stdout, logs.stdout[-300:]
    assert logs.stdout.endswith(f"yyy{MARK}\nmaster-0 | the last line\n"), logs.stdout[-300:]
    waited, status = cli("wait", "long"), cli("status", "long")
    exported = cli("export", "long", "-o", "record\x1b[31m")
    assert exported.returncode == 0 and "record^[[31m (" in exported.stdout and "\x1b" not in exported.stdout
    failure = (cli.cwd / "record\x1b[31m" / "failure.txt").read_text()
    for text in (submitted.stderr, waited.stderr, status.stdout, failure):
        cut = [line for line in text.split("\n") if line.startswith(CUT)]
        assert cut and cut[0].endswith(" more characters cut]"), text[-3000:]
        assert "    | the last line" in text and len(text) < 100_000, text[-3000:]
