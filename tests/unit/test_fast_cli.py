"""The commands people run in loops start without typer or Rich (cli/fast.py), and print exactly what the
Typer app prints for the same line; whatever that parser does not take for certain is left to typer."""

import json
import os
import re
import subprocess
import sys

import pytest

from trainctl.cli import fast
from trainctl.cli.params import Argument, parameters

# the installed entry point, with the modules it loaded as the last line on stderr
PROBE = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["trainctl", *sys.argv[1:]]
from trainctl.cli.fast import main
main()
"""
# the same line through the Typer app alone
TYPER = """
import sys
sys.argv = ["trainctl", *sys.argv[1:]]
from trainctl.cli.app import main
main()
"""


def run(cli, program: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", program, *args], cwd=cli.cwd, env=cli.env, capture_output=True,
                          text=True, timeout=120)


def same_output(result: subprocess.CompletedProcess) -> tuple:
    """Exit status and output, with ages and durations (AGE 12s) left out: two runs may straddle a second."""
    return result.returncode, *(re.sub(r"\b\d+[smhd]\b", "<age>", text) for text in (result.stdout, result.stderr))


def probe(cli, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    result = run(cli, PROBE, *args)
    *lines, modules = result.stderr.splitlines()
    result.stderr = "".join(line + "\n" for line in lines)
    return result, set(json.loads(modules))


@pytest.mark.parametrize("command", sorted(fast.COMMANDS))
def test_the_fast_parser_reads_the_options_typer_declares(command):
    """Both parsers read one declaration; what typer makes of it is what cli/fast.py parses."""
    import typer.main

    from trainctl.cli.app import app

    click_command = typer.main.get_command(app).commands[command]
    module, function, _ = fast.COMMANDS[command]
    declared = parameters(getattr(__import__(f"trainctl.cli.{module}", fromlist=[function]), function))
    assert declared is not None, f"{command}: a parameter is not declared with trainctl.cli.params"
    ours = {p.name: (tuple(sorted(p.declared.names)), p.kind is bool, p.kind is list,
                     isinstance(p.declared, Argument)) for p in declared}
    typers = {p.name: (tuple(sorted(p.opts + p.secondary_opts)) if p.param_type_name == "option" else (),
                       getattr(p, "is_flag", False), p.multiple or p.nargs == -1, p.param_type_name == "argument")
              for p in click_command.params if p.name != "help"}
    assert ours == typers


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """A finished job with two replicas and a failed one, in a private local store."""
    from tests.conftest import CLI

    home = tmp_path_factory.mktemp("fast")
    cli = CLI(home / "home", home)
    script = "import os; print('line', os.environ['RANK']); print('tab\\there [bold]x[/] \\\\[y]')"
    for name, code in (("done", script), ("broke", "import sys; print('boom'); sys.exit(3)")):
        assert cli("submit", "pytorch", "--name", name, "--workers", "2", "--label", "team=a", "--",
                   sys.executable, "-c", code).returncode == 0
    assert cli("wait", "done", "broke", "--timeout", "2m").returncode == 1  # broke failed
    return cli


SAME = [["list"], ["list", "-o", "name"], ["list", "-o", "wide"], ["list", "-A"], ["list", "-o", "json"],
        ["list", "-l", "team=a"], ["list", "--selector=team!=a"], ["list", "-n", "other"],
        ["status", "done"], ["status", "done", "-o", "wide"], ["status", "broke"], ["get", "pytorchjob/done", "-o", "name"],
        ["status", "done", "--output=yaml"], ["status", "nope"], ["status", "tfjob/done"],
        ["logs", "done"], ["logs", "done", "--tail", "1"], ["logs", "broke", "--replica", "master-0"],
        ["logs", "done", "--since", "1h"], ["wait", "done"], ["wait", "done", "broke", "--for", "failed"],
        ["wait", "done", "--for", "running", "--timeout", "5s"]]


@pytest.mark.parametrize("args", SAME, ids=" ".join)
def test_a_plain_line_runs_without_typer_and_prints_what_typer_prints(jobs, args):
    ours, modules = probe(jobs, *args)
    theirs = run(jobs, TYPER, *args)
    assert same_output(ours) == same_output(theirs)
    assert "typer" not in modules and "rich" not in modules, "the fast path was not taken"


LEFT_TO_TYPER = [["list", "--help"], ["status"], ["status", "done", "extra"], ["list", "-Ao", "name"],
                 ["list", "--bogus"], ["list", "-o", "xml"], ["logs", "done", "--tail", "x"],
                 ["logs", "done", "--tail", "-1"], ["list", "-n", "Bad_NS"], ["list", "-l", "a in ("],
                 ["list", "--local=yes"], ["wait"], ["logs", "done", "--", "x"], ["status", "-n"]]


@pytest.mark.parametrize("args", LEFT_TO_TYPER, ids=" ".join)
def test_what_the_fast_parser_is_unsure_of_goes_to_typer(jobs, args):
    ours, modules = probe(jobs, *args)
    theirs = run(jobs, TYPER, *args)
    assert same_output(ours) == same_output(theirs)
    assert "typer" in modules


def test_a_terminal_gets_the_typer_app_and_rich(jobs):
    """On a terminal the output is Rich's (colors, tables that fit): cli/fast.py leaves it alone."""
    import os
    import pty

    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-c", PROBE, "list"], stdin=follower, stdout=follower,
                               stderr=subprocess.PIPE, env=jobs.env, cwd=jobs.cwd)
    os.close(follower)
    _, stderr = process.communicate(timeout=60)
    os.close(leader)
    modules = set(json.loads(stderr.decode().splitlines()[-1]))
    assert "typer" in modules and "rich" in modules


def test_logs_widens_the_pipe_it_writes_into(jobs):
    """A megabyte at a time: the reader of `trainctl logs | ...` wakes a sixteenth as often as with 64 KiB."""
    import fcntl

    reader, writer = os.pipe()
    try:
        subprocess.run([sys.executable, "-m", "trainctl", "logs", "done"], cwd=jobs.cwd, env=jobs.env, stdout=writer,
                       stderr=subprocess.DEVNULL, timeout=60, check=True)
        assert b"line 0" in os.read(reader, 1 << 16)
        limit = int(open("/proc/sys/fs/pipe-max-size").read())
        assert fcntl.fcntl(reader, 1032) == min(1 << 20, limit)  # F_GETPIPE_SZ
    finally:
        os.close(reader)
        os.close(writer)


LEAVER = """
import atexit, sys, threading, time
from trainctl.cli.fast import leave
atexit.register(lambda: print("atexit ran"))
sys.stdout.write("buffered, ")
if sys.argv[1] == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread done, ", end=""))).start()
leave(3)
"""


@pytest.mark.parametrize("left_running", ["none", "thread"])
def test_leaving_without_the_teardown_still_flushes_runs_atexit_and_waits_for_a_running_thread(left_running):
    """The fast path's exit skips the interpreter's teardown (os._exit), and loses nothing a normal exit keeps."""
    result = subprocess.run([sys.executable, "-c", LEAVER, left_running], capture_output=True, text=True, timeout=60)
    waited = "thread done, " if left_running == "thread" else ""
    assert (result.returncode, result.stdout) == (3, f"buffered, {waited}atexit ran\n"), result.stderr
