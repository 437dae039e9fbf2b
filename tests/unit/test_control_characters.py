"""Nothing a replica or the API writes drives the terminal of whoever reads trainctl's output (issue 43).

Every text trainctl shows of theirs goes through trainctl.errors.visible: a failure summary's log tail, metric
names, termination, condition and event messages, a cluster's reasons, the notebook displays. The job below is
what the Kubernetes backend makes of a cluster's answers (its pod through ``replica_row``, its events as
``KubeBackend.get`` keeps them), rendered by ``trainctl status`` through both of its consoles: Rich's (a terminal)
and cli/plain.py's (a pipe, the fast path).
"""

from __future__ import annotations

import io
import json
import time
from types import SimpleNamespace

import pytest

from trainctl.backends.base import JobDetails, LogLine, ReplicaReports
from trainctl.backends.kube.backend import replica_row
from trainctl.backends.reported import job_progress
from trainctl.errors import UserError
from trainctl.functions.runner import RAISED_MARKER
from trainctl.reporting import encoded_lines
from trainctl.sdk.failures import summarize

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mfake: job Succeeded\x1b[0m"  # sets the title, clears, paints a fake line
HOSTILE_SHOWN = "^[]0;pwned^G^[[2J^[[31mfake: job Succeeded^[[0m"
RED, RED_SHOWN = "\x1b[31mred\x1b[0m", "^[[31mred^[[0m"
MARKUP = "[bold red]markup[/]"  # Rich markup in a metric name prints as written
TQDM = " 10%|#         | 1/10\r 50%|#####     | 5/10\r100%|##########| 10/10\r"
RECORD = f"{RAISED_MARKER} " + json.dumps({"time_ns": 5, "exception": f"ValueError: {HOSTILE}", "rank": None})


def test_control_characters_are_shown_and_a_carriage_return_keeps_what_a_terminal_shows():
    from trainctl.errors import visible

    assert visible(HOSTILE) == HOSTILE_SHOWN
    assert visible("bell\x07 del\x7f csi\x9b[2J nel\x85 nul\x00 tab\tstays") == \
        "bell^G del^? csi\\x9b[2J nel\\x85 nul^@ tab\tstays"
    assert visible(TQDM) == "100%|##########| 10/10"  # a progress bar's final state
    assert visible("ends as read\r") == "ends as read" and visible("one\ntwo") == "one^Jtwo"
    assert visible("plain text, [brackets] and é 漢") == "plain text, [brackets] and é 漢"


def test_an_error_message_quoting_the_api_drives_no_terminal():
    assert UserError(f"the API server said: {RED}").message == f"the API server said: {RED_SHOWN}"


# ---- a failed job as the Kubernetes backend reads it -------------------------------------------------------

def failed_job() -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "demo", "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "img"}]}}}}},
            "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "PyTorchJobFailed",
                                       "message": f"the job failed {RED}"}],
                       "startTime": "2026-01-01T00:00:01Z", "completionTime": "2026-01-01T00:00:09Z"}}


def master_pod() -> dict:
    return {"metadata": {"name": "demo-master-0", "labels": {"training.kubeflow.org/replica-type": "master",
                                                             "training.kubeflow.org/replica-index": "0"}},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Failed", "containerStatuses": [{"name": "pytorch", "state": {"terminated": {
                "exitCode": 3, "reason": f"Error{RED}", "finishedAt": "2026-01-01T00:00:08Z", "message": RECORD}}}]}}


def details(event_message: str = f"pod said {HOSTILE}") -> JobDetails:
    events = [{"type": "Warning", "reason": f"Odd{RED}", "message": event_message, "time": "2026-01-01T00:00:08Z"}]
    return JobDetails(failed_job(), [replica_row(master_pod(), ["Master"])], events)


LOG = ["step 1", TQDM, HOSTILE]


def reports_backend(now: float, metrics: dict[str, float] | None = None):
    """What the backend hands back of the replica's ``trainctl.report(step=1, total=2, **metrics)``."""
    metrics = {RED: 1.0, MARKUP: 2.0} if metrics is None else metrics
    lines = [line.decode().rstrip("\n") for line in encoded_lines([(now, 1, 2, metrics)])]
    return SimpleNamespace(reports=lambda name, namespace, details=None: {
        "master-0": ReplicaReports("master-0", lines, now)})


class Client:
    """What ``trainctl status`` asks of the SDK's client, answered from ``details``, the replica's ``log`` and the
    ``metrics`` it reported."""

    def __init__(self, details: JobDetails, log: list[str], metrics: dict[str, float] | None = None) -> None:
        self.details, self.log, self.metrics = details, log, metrics
        self.backend = SimpleNamespace(description="a cluster", kueue_workload=lambda resource: None)

    def get(self, name, namespace=None, kind=None):
        return self.details

    def progress(self, name, namespace, details=None):
        return job_progress(reports_backend(time.time(), self.metrics), self.details)

    def failure_summary(self, name, namespace, details=None):
        return summarize(self.details, lambda runs: [self.log for _ in runs])


def status_output(monkeypatch, terminal: bool, client: Client | None = None) -> str:
    """``trainctl status demo`` as printed to a terminal (Rich) or into a pipe (cli/plain.py)."""
    from rich.console import Console

    from trainctl.cli import common, status
    from trainctl.cli.plain import PlainConsole

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, highlight=False, emoji=False, width=250) if terminal \
        else PlainConsole(out)
    monkeypatch.setitem(common._consoles, False, console)
    monkeypatch.setattr(common, "stdout_is_terminal", lambda: terminal)
    monkeypatch.setattr(status, "make_client", lambda *args: client or Client(details(), LOG))
    monkeypatch.setattr("sys.stdout", out)  # the replicas' table, piped, is echoed
    status.status("demo")
    return out.getvalue()


@pytest.fixture(params=["terminal", "pipe"])
def printed(request, monkeypatch) -> str:
    return status_output(monkeypatch, request.param == "terminal")


def assert_inert(text: str) -> None:
    """A terminal gets Rich's own colors (ESC [ ... m), none of the replica's sequences; a pipe no escape at all."""
    assert not any(raw in text for raw in ("\x07", "\x1b]", "\x1b[2J", "\x1b[31mred", "\x1b[31mfake")), text
    assert "\x1b[1m" in text or "\x1b" not in text, text


def test_status_shows_the_log_tail_of_the_failure_summary_escaped(printed):
    assert f"    | {HOSTILE_SHOWN}\n" in printed
    assert "    | 100%|##########| 10/10\n" in printed  # the bar's last state, as the terminal showed it
    assert_inert(printed)


def test_status_shows_metric_names_escaped_and_markup_in_them_as_written(printed):
    assert f"progress: 1/2 (50%), {RED_SHOWN} 1, {MARKUP} 2" in printed
    assert_inert(printed)


def test_status_shows_the_termination_message_escaped(printed):
    assert f"master-0 raised ValueError: {HOSTILE_SHOWN}; exit code 3 (Error{RED_SHOWN})" in printed
    assert_inert(printed)


def test_status_shows_event_and_condition_messages_escaped(printed):
    assert f"Warning Odd{RED_SHOWN}: pod said {HOSTILE_SHOWN}" in printed
    assert f"PyTorchJobFailed: the job failed {RED_SHOWN}" in printed
    assert_inert(printed)


# ---- the other displays: wait's bar, list's row, the notebook -----------------------------------------------

def test_waits_progress_bar_shows_metric_names_escaped():
    from trainctl.sdk.progress import bar_text, shown_text

    progress = job_progress(reports_backend(time.time()), details())
    assert bar_text(progress).endswith(f"{RED_SHOWN} 1 {MARKUP} 2")
    assert shown_text(HOSTILE) == "^[]0;pwned^Gfake: job Succeeded"  # the live line's log line: colours dropped


def test_a_jobs_row_shows_what_the_cluster_holds_escaped():
    from trainctl.sdk.display import job_row

    resource = failed_job()
    resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"] = f"img{RED}"
    assert job_row(resource, wide=True)[-1] == f"img{RED_SHOWN}"


def test_notebook_text_displays_show_log_lines_and_progress_escaped():
    from trainctl.sdk.display import LogLines

    texts = []
    printer = SimpleNamespace(text=texts.append)
    LogLines(iter([LogLine("master-0", HOSTILE), LogLine("master-0", TQDM)]))._repr_pretty_(printer, False)
    job_progress(reports_backend(time.time()), details())._repr_pretty_(printer, False)
    assert texts[0] == f"master-0 | {HOSTILE_SHOWN}\nmaster-0 | 100%|##########| 10/10"
    assert f"{RED_SHOWN} 1, {MARKUP} 2" in texts[1]
    assert not any("\x1b" in text for text in texts)
