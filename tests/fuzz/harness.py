"""Running the CLI in-process for fuzzing, and the promises every run must keep.

A subprocess per case would cost ~0.3 s, so ``run`` calls ``trainctl.cli.app.main``
with a patched ``sys.argv`` and captured stdout/stderr: thousands of cases fit in a CI
minute. A CPU-time timer (ITIMER_PROF) turns a hang into a failure after :data:`HANG_SECONDS` of the
process's CPU time: a loop that never ends burns CPU and is caught; a process merely starved on a loaded
machine is slow, not hung, and is not. A wall-clock timer, :data:`BLOCKED_SECONDS`, catches a run that
blocks without using CPU (a lock never released, a read that never returns). Each
``run`` is counted; conftest.py reports the totals at the end of the session.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

HANG_SECONDS = 10
BLOCKED_SECONDS = 120  # far beyond any case on a loaded machine (the slowest take a few seconds)
COUNTS: Counter = Counter()  # "cases", "exit 0", "exit 2"
REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*/job.yaml"))


# The same cases on every run: the seed comes from each test's own code, so a CI failure
# reproduces locally with the same command (and print_blob prints @reproduce_failure for it).
# derandomize implies no example database, nothing is written to the repository.
FUZZ = settings(
    derandomize=True,
    deadline=None,  # the alarm in run() catches hangs; timings on 2 shared cores vary too much
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def fuzz(max_examples: int) -> settings:
    return settings(FUZZ, max_examples=max_examples)


class Hang(Exception):
    """The command used more than HANG_SECONDS of CPU time, or blocked for BLOCKED_SECONDS."""


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


def _on_alarm(signum, frame):
    if signum == signal.SIGALRM:
        raise Hang(f"no result within {BLOCKED_SECONDS} s: blocked")
    raise Hang("no result within the CPU time allowed")


TIMERS = ((signal.ITIMER_PROF, signal.SIGPROF, HANG_SECONDS), (signal.ITIMER_REAL, signal.SIGALRM, BLOCKED_SECONDS))


@contextlib.contextmanager
def bounded(cpu_seconds: float = HANG_SECONDS):
    """Raises Hang in the block past ``cpu_seconds`` of CPU time or BLOCKED_SECONDS of waiting."""
    previous = [signal.signal(signum, _on_alarm) for _, signum, _ in TIMERS]
    for (timer, _, _), seconds in zip(TIMERS, (cpu_seconds, BLOCKED_SECONDS)):
        signal.setitimer(timer, seconds)
    try:
        yield
    finally:
        for (timer, signum, _), handler in zip(TIMERS, previous):
            signal.setitimer(timer, 0)
            signal.signal(signum, handler)


def run(*args: str, stdin: bytes = b"") -> Result:
    """``trainctl ARGS`` in this process; asserts the universal promises before returning."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv, sys.stdin
    sys.argv, sys.stdin = ["trainctl", *args], io.TextIOWrapper(io.BytesIO(stdin))
    try:
        from trainctl.cli.app import main

        with bounded(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as exit:
                code = exit.code if isinstance(exit.code, int) else 1
    finally:
        sys.argv, sys.stdin = saved
    result = Result(code, out.getvalue(), err.getvalue())
    COUNTS["cases"] += 1
    COUNTS[f"exit {code}"] += 1
    assert_promises(result, args)
    return result


def assert_promises(result: Result, args) -> None:
    """Exit 0 or 2; a rejection is exactly one line on stderr that starts with "error:"."""
    context = f"args={args!r} stderr={result.stderr!r}"
    assert result.code in (0, 2), context
    assert "Traceback" not in result.stderr, context
    if result.code == 2:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), context


def json_documents(result: Result) -> list[dict]:
    """The resources a successful ``-o json`` run printed (one, or a List's items)."""
    document = json.loads(result.stdout)
    return document["items"] if document.get("kind") == "List" else [document]


def shape(node, path: str = "") -> set[str]:
    """Every key path and list position of a resource, without its leaf values."""
    if isinstance(node, dict):
        return {path} | {p for key, value in node.items() for p in shape(value, f"{path}.{key}")}
    if isinstance(node, list):
        return {path} | {p for index, value in enumerate(node) for p in shape(value, f"{path}[{index}]")}
    return {path}


def all_strings(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from all_strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from all_strings(item)
    elif isinstance(node, str):
        yield node


def files_under(directory: Path) -> list[tuple[str, int]]:
    """Every file under ``directory`` with its size."""
    return sorted((str(path.relative_to(directory)), path.stat().st_size)
                  for path in directory.rglob("*") if path.is_file())


@contextlib.contextmanager
def private_state():
    """A fresh TRAINCTL_HOME, no cluster, the local backend; a scratch working directory."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    with tempfile.TemporaryDirectory(prefix="trainctl-fuzz-") as scratch:
        home = Path(scratch) / "home"
        os.environ.update(TRAINCTL_HOME=str(home), KUBECONFIG="/nonexistent", TRAINCTL_BACKEND="local",
                          # the commands' python is this one, as for a user with the venv active (and the CLI fixture)
                          PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
        os.chdir(scratch)
        try:
            yield Path(scratch), home
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)


# ---- strategies shared by the fuzz tests ----------------------------------------

# Characters that broke things before: YAML line breaks and specials, quotes, template syntax,
# shell syntax, Rich markup, path traversal, controls, astral characters.
# (No NUL: an argument cannot hold one. U+DCFF is how a non-UTF-8 byte arrives.)
SPECIAL = ["\x85", "\u2028", "\u2029", "\x7f", "\ufeff", "\udcff", "\t", "\n", "\r", "\\", '"', "'", "{{", "}}",
           "{%", "%}", ": ", "- ", "&a", "*a", "!!binary", "!!set", "#", "[", "]", "{", "}", ",", "$(", "`",
           "[red]", "../", "/", "=", ":", "😀", "\U0001f600", "é", " "]
TOKENS = ["2", "0", "-1", "500m", "4Gi", "a=b", "A=1", "team=ml", "pvc:data:/data", "host:/a:/b:ro",
          "key=v:NoSchedule", "k:NoExecute", "Never", "OnFailure", "All", "auto", "python", "train.py",
          "2024-01-01", "true", "null", "~", ".inf", "1e400", "9" * 30, "0x1F", "ok-name"]

text_values = st.one_of(
    st.sampled_from(TOKENS),
    st.lists(st.sampled_from(SPECIAL + list("abcXYZ019=-._/:")), max_size=10).map("".join),
    st.text(st.characters(exclude_characters="\x00"), max_size=20),
)
integer_values = st.one_of(
    st.integers(min_value=-3, max_value=5),
    st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, 2**63, -2**63 - 1, 10**30]),
    st.integers(),
).map(str)


# ---- Kubernetes' rules, as an oracle written from apimachinery's own formats, apart from trainctl's code ----
# (k8s.io/apimachinery/pkg/api/validate/content/kube.go, pkg/util/validation/validation.go). Go's ^...$
# match the whole text, as fullmatch does; Go measures lengths in bytes.

K8S_NAME_FORMAT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"  # labelKeyFmt
K8S_DNS_LABEL_FORMAT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
K8S_ENV_NAME_FORMAT = "[-._a-zA-Z][-._a-zA-Z0-9]*"


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def kubernetes_label_key(key: str) -> bool:
    parts = key.split("/")
    if len(parts) > 2:
        return False
    if len(parts) == 2:
        prefix = parts[0]
        subdomain = f"{K8S_DNS_LABEL_FORMAT}(\\.{K8S_DNS_LABEL_FORMAT})*"
        if not prefix or _bytes(prefix) > 253 or not re.fullmatch(subdomain, prefix):
            return False
    return 0 < _bytes(parts[-1]) <= 63 and re.fullmatch(K8S_NAME_FORMAT, parts[-1]) is not None


def kubernetes_label_value(value: str) -> bool:
    return _bytes(value) <= 63 and re.fullmatch(f"({K8S_NAME_FORMAT})?", value) is not None


def kubernetes_env_name(name: str) -> bool:
    return re.fullmatch(K8S_ENV_NAME_FORMAT, name) is not None and name != "." and not name.startswith("..")


def kubernetes_port(port: int, zero_means_none: bool = False) -> bool:
    return (0 if zero_means_none else 1) <= port <= 65535


def kubernetes_port_name(name: str) -> bool:
    return (0 < len(name) <= 15 and re.fullmatch("[-a-z0-9]+", name) is not None and re.search("[a-z]", name)
            is not None and "--" not in name and not name.startswith("-") and not name.endswith("-"))


def process_text(text: str) -> bool:
    """What a process can be given: valid Unicode (what JSON carries) without a NUL (where C strings end)."""
    return "\x00" not in text and not any("\ud800" <= char <= "\udfff" for char in text)


def mostly(good, bad):
    """``good`` 4 times in 5: st.one_of flattens nested choices, so it cannot be weighted by repetition."""
    return st.integers(0, 4).flatmap(lambda n: good if n else bad)


# Mostly valid by construction, so a document of several fields is often valid as a whole.
label_keys = mostly(
    st.from_regex(r"([a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?(\.[a-z0-9]{1,4}){0,2}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,66}"
                  r"[A-Za-z0-9])?", fullmatch=True),
    st.one_of(st.sampled_from(["a/b/c", "/x", "x/", "tëam", "ｔeam", "k" * 64, "a." * 126 + "b/x", "a." * 127 + "b/x",
                               "Example.com/x", "-x", "x_", "x\n", "x\x00", "a..b/c"]), text_values),
)
label_values = mostly(
    st.from_regex(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,65}[A-Za-z0-9])?)?", fullmatch=True),
    st.one_of(st.sampled_from(["v" * 64, "-x", "x-", "é", "١٢", "a b", "x\x00"]), text_values),
)
env_names = mostly(st.from_regex(K8S_ENV_NAME_FORMAT, fullmatch=True),
                   st.one_of(st.sampled_from([".", "..", "..x", "1A", "A\x00", "É"]), text_values))
env_values = mostly(text_values, st.sampled_from(["\x00", "a\x00b", "x\x00" * 3]))
port_numbers = mostly(st.integers(1, 65535), st.one_of(st.integers(-3, 3), st.integers(65533, 65538),
                                                       st.sampled_from([2**31, 2**40, -2**31]), st.integers()))
port_names = mostly(st.from_regex(r"[a-z]([-a-z0-9]{0,13}[a-z0-9])?", fullmatch=True),
                    st.one_of(st.from_regex(r"[-a-z0-9]{1,17}", fullmatch=True), text_values))
