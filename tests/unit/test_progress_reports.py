"""trainctl.report() in a process (trainctl.reporting) and what is made of its points (trainctl.backends.reported).

The writer runs in real subprocesses, as in a replica: its thread, its exit, its environment.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from trainctl import reporting
from trainctl.backends.base import JobDetails, ReplicaReports, ReplicaRow
from trainctl.backends.reported import (MAX_POINTS, JobProgress, Point, Progress, from_annotation, job_progress, summary,
                                       stamped, stored_fields, thinned, to_annotation)
from trainctl.code.pods import replica_library
from trainctl.frameworks import by_name


def replica(code: str, progress: Path | None, **env: str) -> subprocess.CompletedProcess:
    """``code`` run as a replica would run it, its reports going to ``progress``."""
    variables = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **env}
    if progress is not None:
        variables[reporting.ENV] = str(progress)
    return subprocess.run([sys.executable, "-c", code], env=variables, capture_output=True, text=True, timeout=60)


def written(progress: Path) -> list[tuple]:
    return [point for line in progress.read_text().splitlines() for point in reporting.points_of(line)]


def points_of_a_loop(tmp_path: Path, calls: str) -> list[tuple]:
    """The points a replica wrote that ran ``for step in range(...): <calls>``."""
    progress = tmp_path / "p"
    done = replica(f"import trainctl\nfor step in {calls}\n", progress)
    assert done.returncode == 0, done.stderr
    return written(progress)


def test_outside_a_job_report_does_nothing_and_starts_no_thread(tmp_path):
    done = replica("import threading, trainctl\n"
                   "trainctl.report(step=1, total=2, loss=0.5)\n"
                   "print(threading.active_count())", None)
    assert done.returncode == 0 and done.stdout.strip() == "1" and done.stderr == "", done.stderr


def test_every_point_is_written_until_the_series_is_long_then_fewer_and_always_the_last(tmp_path):
    points = points_of_a_loop(tmp_path, "range(1, 25001): trainctl.report(step=step, total=25000, loss=1 / step)")
    # 10,000 at full rate, the next 15,000 reports at half rate: 7,500; and the last one, which was not kept
    assert len(points) == reporting.MAX_SERIES + 7_500 + 1
    assert [p[1] for p in points[:3]] == [1, 2, 3] and points[reporting.MAX_SERIES][1] == reporting.MAX_SERIES + 1
    assert points[-1][1:3] == (25000, 25000)
    assert all(len(line.encode()) < reporting.MAX_LINE_BYTES for line in (tmp_path / "p").read_text().splitlines())


def test_steps_without_metrics_only_move_the_progress_on(tmp_path):
    points = points_of_a_loop(tmp_path, "range(1, 1001): trainctl.report(step=step, total=1000)")
    assert len(points) <= 3 and points[-1][1:] == (1000, 1000, {})  # the first at once, the last at exit


def launch_env(kind: str) -> dict[str, str]:
    """The kind's launch facts, as both runtimes hand them to a replica (trainctl.code.pods, the supervisor)."""
    return {reporting.LAUNCH_ENV: json.dumps(by_name(kind).function_launch.as_call())}


def test_only_the_first_process_of_a_replica_reports(tmp_path):
    for kind, env in (("pytorch", {"LOCAL_RANK": "1"}), ("mpi", {"OMPI_COMM_WORLD_RANK": "2"})):
        progress = tmp_path / "p"
        assert replica("import trainctl; trainctl.report(step=1)", progress, **launch_env(kind), **env).returncode == 0
        assert not progress.exists(), env


@pytest.mark.parametrize("kind, env, leads_replica, leads_job", [
    ("pytorch", {"LOCAL_RANK": "0", "RANK": "0"}, True, True),
    ("pytorch", {"LOCAL_RANK": "0", "RANK": "2"}, True, False),
    ("pytorch", {"LOCAL_RANK": "1", "RANK": "1"}, False, False),
    ("xgboost", {"RANK": "1"}, True, False),
    ("mpi", {"OMPI_COMM_WORLD_RANK": "0"}, True, True),
    ("mpi", {"PMI_RANK": "3"}, False, False),
    ("paddle", {"PADDLE_TRAINER_ID": "0"}, True, True),
    ("jax", {"PROCESS_ID": "1"}, True, False),
    ("jax", {"JAX_PROCESS_ID": "1"}, True, False),  # Trainer v2's jax plugin (a TrainJob's function, api="v2")
    ("jax", {"JAX_PROCESS_ID": "0"}, True, True),
    ("tensorflow", {"TF_CONFIG": json.dumps({"cluster": {"chief": ["c:1"], "worker": ["w:1"]},
                                             "task": {"type": "chief", "index": 0}})}, True, True),
    ("tensorflow", {"TF_CONFIG": json.dumps({"cluster": {"chief": ["c:1"], "worker": ["w:1"]},
                                             "task": {"type": "worker", "index": 0}})}, True, False),
    ("tensorflow", {"TF_CONFIG": json.dumps({"cluster": {"worker": ["w:1", "w:2"]},
                                             "task": {"type": "worker", "index": 0}})}, True, True),
    ("tensorflow", {}, True, True),  # one replica: no TF_CONFIG
])
def test_who_reports_is_the_kinds_fact_handed_over_as_data(kind, env, leads_replica, leads_job):
    """The rank variables are the framework's (FunctionLaunch), read from TRAINCTL_LAUNCH: the reporter names none."""
    given = {**launch_env(kind), **env}
    assert (reporting.leads_its_replica(given), reporting.leads_the_job(given)) == (leads_replica, leads_job)
    # another kind's variables mean nothing to this one
    assert reporting.leads_its_replica({**launch_env("jax"), **env}) is True


def test_without_launch_facts_every_process_reports_and_garbled_facts_change_nothing():
    for facts in ({}, {reporting.LAUNCH_ENV: "not json"}, {reporting.LAUNCH_ENV: "[1]"},
                  {reporting.LAUNCH_ENV: json.dumps({"replica_ranks": "LOCAL_RANK", "cluster_spec": ["x"]})}):
        env = {**facts, "LOCAL_RANK": "3", "TF_CONFIG": "{}"}
        assert reporting.leads_its_replica(env) and reporting.leads_the_job(env), facts


def test_a_pod_gets_the_kinds_launch_facts(tmp_path):
    from trainctl.submit.code_plan import request
    from trainctl.submit.options import SubmitOptions
    from trainctl.submit.render import render

    (tmp_path / "train.py").write_text("")
    for kind in ("pytorch", "mpi"):
        options = SubmitOptions(command=["python", "train.py"], workdir=str(tmp_path))
        framework = by_name(kind)
        resource = render(framework, options, request(options, "kubernetes", framework.kind))
        for spec in resource["spec"][framework.replica_spec_field].values():
            [container] = spec["template"]["spec"]["containers"]
            env = {item["name"]: item.get("value") for item in container["env"]}
            assert json.loads(env[reporting.LAUNCH_ENV]) == framework.function_launch.as_call(), kind
    # locally the supervisor sets it: tests/local/test_progress.py's MLflow test sees one run of two replicas


def test_what_is_no_number_is_left_out_and_said_once(tmp_path):
    progress = tmp_path / "p"
    done = replica("import trainctl\n"
                   "for _ in range(3):\n"
                   "    trainctl.report(step=1.5, total=-1, loss='low', acc=0.5)\n", progress)
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        "trainctl.report: step='1.5' is left out: give a whole number >= 0",
        "trainctl.report: total='-1' is left out: give a whole number >= 1",
        "trainctl.report: loss='low' is left out: not a number"]
    assert {json.dumps(p[1:]) for p in written(progress)} == {json.dumps([None, None, {"acc": 0.5}])}


def test_a_report_that_cannot_be_written_never_stops_the_training(tmp_path):
    done = replica("import trainctl\n"
                   "trainctl.report(step=1, loss=0.1)\n"
                   "print('trained on', flush=True)\n", tmp_path / "no-such-directory" / "p")
    assert done.returncode == 0 and done.stdout == "trained on\n"
    assert "trainctl.report: cannot write to" in done.stderr and "reports are dropped" in done.stderr


@pytest.mark.parametrize("installed", [False, True])
def test_the_stand_in_package_gives_way_to_an_installed_trainctl(tmp_path, installed):
    for name, data in replica_library("lib").items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    path = [str(tmp_path / "lib"), *([str(REPO)] if installed else [])]
    probe = ("import json, sys; sys.path[:0] = sys.argv[1:]; import trainctl\n"
             "print(json.dumps([trainctl.__file__, hasattr(trainctl, 'Client'), callable(trainctl.report)]))")
    # -S: no site-packages, where an editable install of trainctl would be found
    done = subprocess.run([sys.executable, "-S", "-c", probe, *path], env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    where, has_client, reports = json.loads(done.stdout)
    expected = REPO / "trainctl" / "__init__.py" if installed else tmp_path / "lib" / "trainctl" / "__init__.py"
    assert (Path(where), has_client, reports) == (expected, installed, True)


# ---- what is made of the points ----------------------------------------------------------------------

def reports(*points: tuple, last_output: float | None = None, replica: str = "master-0") -> ReplicaReports:
    return ReplicaReports(replica, reporting.encoded_lines(list(points))[0].decode().splitlines()
                          if points else [], last_output)


def test_the_rate_is_over_the_last_minute_and_the_eta_is_what_is_left_at_it():
    series = [Point(1000.0 + 10 * s, s, 100, {"loss": 1 / s}) for s in range(1, 21)]  # a step every 10 s
    progress = summary(reports(), series, now=1200.0)
    assert progress.rate == pytest.approx(0.1) and progress.eta == pytest.approx(800)
    assert progress.text(now=1205.0) == "20/100 (20%), 0.1 steps/s, ETA 13m, loss 0.05, 5s ago"
    assert progress.text(now=1205.0, finished=True) == "20/100 (20%), loss 0.05"


def test_without_a_total_or_a_second_point_there_is_no_eta():
    assert summary(reports(), [Point(1.0, 5, None, {})], now=2.0).text(now=2.0) == "step 5, 1s ago"
    assert summary(reports(), [Point(1.0, 5, 0, {})], now=2.0).where() == "step 5"  # a total of 0, written by hand
    progress = summary(reports(), [Point(1.0, 1, None, {"a": 1.0}), Point(2.0, 3, None, {})], now=2.0)
    assert (progress.rate, progress.eta, progress.metrics) == (2.0, None, {"a": 1.0})


def running(**annotations: str) -> dict:
    return {"kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "default", "annotations": annotations},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 2}}},
            "status": {"startTime": "2026-01-01T00:00:00Z", "conditions": [{"type": "Running", "status": "True"}]}}


class Reports:
    """A backend that only answers ``reports``."""

    def __init__(self, found: dict) -> None:
        self.found = found

    def reports(self, name, namespace, whole=False, details=None):
        return self.found


START = 1767225600.0  # 2026-01-01T00:00:00Z


def test_a_job_is_stalled_once_no_replica_was_heard_from_for_its_stall_time_and_replicas_that_differ_show():
    found = {"worker-0": reports((START + 5, 7, 10, {"loss": 0.5}), last_output=START + 30, replica="worker-0"),
             "master-0": ReplicaReports("master-0", [], START + 10),
             "worker-1": reports((START + 6, 8, 10, {}), last_output=START + 6, replica="worker-1")}
    details = JobDetails(running(**{"trainctl.io/stall-after": "120"}))
    progress = job_progress(Reports(found), details, now=START + 100)
    assert [p.replica for p in progress.replicas] == ["worker-0", "worker-1"]  # replica order; master: none
    assert progress.stalled_for is None and (progress.step, progress.total) == (7, 10)
    assert progress.lines(now=START + 100) == ["progress: 7/10 (70%), loss 0.5, 1m ago",
                                                "  worker-0: 7/10 (70%), loss 0.5, 1m ago",
                                                "  worker-1: 8/10 (80%), 1m ago"]
    stalled = job_progress(Reports(found), details, now=START + 150)
    assert stalled.stalled_for == pytest.approx(120) and stalled.cell() == "stalled 2m"
    assert stalled.stall_text() == "stalled: no output or progress for 2m"
    restarted = JobDetails(details.resource, replicas=[ReplicaRow("j-worker-1", "Worker", 1, "Running",
                                                                  started="2026-01-01T00:02:00Z")])
    assert job_progress(Reports(found), restarted, now=START + 150).stalled_for is None  # it just started again
    assert JobProgress("Succeeded", stalled.replicas).stall_text() is None


def test_the_default_stall_time_is_ten_minutes():
    details = JobDetails(running())
    assert job_progress(Reports({}), details, now=START + 599).stalled_for is None
    assert job_progress(Reports({}), details, now=START + 600).stall_text() == "stalled: no output or progress for 10m"


def test_the_controllers_annotation_reads_back_with_its_stall():
    lead = Progress("master-0", step=3, total=9, time=START + 1, metrics={"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0,
                                                                        "e": 5.0}, rate=0.5)
    text = stamped(to_annotation(lead, START + 2), written=START + 3)
    assert len(json.loads(text)["metrics"]) == 4
    details = JobDetails(running(**{"trainctl.io/progress": text}))
    assert stored_fields(details.resource) == (to_annotation(lead, START + 2), START + 3)  # the write bound's clock
    progress = from_annotation(details, now=START + 10)
    assert (progress.step, progress.total, progress.rate, progress.cell()) == (3, 9, 0.5, "3/9 33%")
    assert from_annotation(details, now=START + 2 + 600).cell() == "stalled 10m"
    assert from_annotation(JobDetails(running()), now=START) is None


def test_metrics_past_the_limit_are_thinned_evenly_keeping_the_first_and_the_last():
    series = list(range(25_000))
    kept = thinned(series, MAX_POINTS)
    assert len(kept) == MAX_POINTS and kept[0] == 0 and kept[-1] == 24_999
    assert thinned(series[:50], MAX_POINTS) == series[:50]


def test_plotting_without_matplotlib_is_one_line_saying_what_to_install(monkeypatch):
    from trainctl.errors import UserError
    from trainctl.sdk.plotting import plot

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(UserError) as raised:
        plot([Point(1.0, 1, None, {"loss": 1.0})], None, "j")
    assert raised.value.message == "plotting needs matplotlib, an optional extra: pip install 'trainctl[plot]'"


def test_a_metric_name_is_drawn_as_text_never_as_math(tmp_path):
    from trainctl.sdk.plotting import plot

    plot([Point(1.0, 1, None, {"$\\frac{": 1.0, "a$b$": 2.0}), Point(2.0, 2, None, {"$\\frac{": 0.5})], None, "j",
         str(tmp_path / "x.png"))
    assert (tmp_path / "x.png").read_bytes().startswith(b"\x89PNG")


def test_a_job_with_more_metrics_than_one_image_holds_draws_the_first_and_names_the_rest(tmp_path):
    from trainctl.sdk.plotting import MAX_PANELS, plot

    names = [f"grad_norm/layer{index}" for index in range(40)]
    series = [Point(float(step), step, None, {name: step * 0.5 for name in names}) for step in range(3)]
    shown = plot(series, None, "j", str(tmp_path / "x.png"))
    drawn = [panel.get_ylabel() for panel in shown.figure.axes]
    assert drawn == names[:MAX_PANELS] and shown.left_out == tuple(names[MAX_PANELS:])
    assert shown.figure.axes[0].get_title() == f"j ({MAX_PANELS} of 40 metrics)"
    assert plot(series, names[30:], "j").left_out == ()  # named ones: exactly those


def test_naming_more_metrics_than_one_image_holds_says_so():
    from trainctl.errors import InvalidArgument
    from trainctl.sdk.plotting import MAX_PANELS, plot

    names = [f"m{index}" for index in range(MAX_PANELS + 1)]
    with pytest.raises(InvalidArgument) as raised:
        plot([Point(1.0, 1, None, dict.fromkeys(names, 1.0))], names, "j")
    assert raised.value.message == f"metrics names 17 metrics: one image draws at most {MAX_PANELS}, so draw them " \
                                   "in several"
