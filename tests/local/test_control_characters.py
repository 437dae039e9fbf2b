"""Issue 43 as a user met it: a replica that prints control sequences and reports a metric named with them
drives nobody's terminal through ``submit --wait``, ``wait``, ``status`` or ``export``; ``logs`` still copies
its output byte for byte into a pipe."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(90)

# sets the terminal's title, clears the screen, paints a fake line in red; reports a metric named in red
SCRIPT = r"""
import sys, trainctl
trainctl.report(step=1, total=2, **{"\x1b[31mred\x1b[0m": 1.0, "[bold red]markup[/]": 2.0})
print("\x1b]0;pwned\x07\x1b[2J\x1b[31mfake: job Succeeded\x1b[0m", flush=True)
sys.exit(3)
"""
SHOWN = "    | ^[]0;pwned^G^[[2J^[[31mfake: job Succeeded^[[0m\n"


def test_a_hostile_replica_is_shown_escaped_by_every_summary_and_copied_as_written_by_logs(cli):
    (cli.cwd / "hostile.py").write_text(SCRIPT)
    submitted = cli("submit", "pytorch", "--name", "hostile", "--workers", "1", "--restart-policy", "Never", "--wait",
                    "--", "python", "hostile.py")
    assert submitted.returncode == 1, submitted.stderr
    waited, status = cli("wait", "hostile"), cli("status", "hostile")
    assert cli("export", "hostile", "-o", "record").returncode == 0
    summary_file = (cli.cwd / "record" / "failure.txt").read_text()
    for text in (submitted.stderr, waited.stderr, status.stdout, summary_file):
        assert SHOWN in text and "\x1b" not in text and "\x07" not in text, text
    assert "progress: 1/2 (50%), ^[[31mred^[[0m 1, [bold red]markup[/] 2" in status.stdout
    logs = cli("logs", "hostile")
    assert logs.stdout == "master-0 | \x1b]0;pwned\x07\x1b[2J\x1b[31mfake: job Succeeded\x1b[0m\n"
