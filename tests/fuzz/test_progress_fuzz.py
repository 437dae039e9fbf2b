"""Fuzzing the progress channel (trainctl.reporting, trainctl.backends.reported): what replicas write is untrusted.

Points written by ``trainctl.report`` come back as they were; any other line
after the marker (forged JSON, garbled, cut, huge, deeply nested) yields only points that are exactly
what a report writes, never an exception; ``report`` itself never raises whatever it is given; and a
local job whose progress file holds anything at all still gets ``status``, ``list`` and ``plot`` that end
with exit 0 or one ``error:`` line. The controller's annotation, edited by anyone, reads back or is None.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import COUNTS, fuzz, run
from trainctl import reporting
from trainctl.backends.base import JobDetails
from trainctl.backends.reported import PROGRESS_ANNOTATION, from_annotation

pytestmark = pytest.mark.fuzz

counts = st.one_of(st.none(), st.integers(0, 2**63))
names = st.text(min_size=1, max_size=reporting.MAX_NAME_CHARS)
numbers = st.floats(allow_nan=True, allow_infinity=True)
points = st.tuples(st.floats(0, 4e9), counts, counts, st.dictionaries(names, numbers, max_size=reporting.MAX_METRICS))
anything = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
                        lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner,
                                                                                             max_size=4)),
                        max_leaves=12)


def same_number(left: float, right: float) -> bool:
    return left == right or (math.isnan(left) and math.isnan(right))


@fuzz(300)
@given(written=st.lists(points, max_size=60))
def test_reported_points_come_back_as_they_were(written):
    COUNTS["cases"] += 1
    lines = reporting.encoded_lines(written)
    assert all(len(line) <= reporting.MAX_LINE_BYTES for line in lines) or len(written) == 1
    read = [point for line in lines for point in reporting.points_of(line.decode())]
    assert len(read) == len(written)
    for (moment, step, total, metrics), back in zip(written, read):
        assert back[0] == moment and back[1:3] == (step, total)
        assert back[3].keys() == metrics.keys() and all(same_number(metrics[k], back[3][k]) for k in metrics)


@st.composite
def hostile_lines(draw) -> str:
    kind = draw(st.sampled_from(["json", "points", "garbled", "cut", "deep", "prefixed"]))
    if kind == "json":
        return f"{reporting.MARKER} {json.dumps(draw(anything))}"
    if kind == "points":  # near-valid: lists of four of anything
        return f"{reporting.MARKER} {json.dumps(draw(st.lists(st.lists(anything, min_size=3, max_size=5), max_size=4)))}"
    if kind == "garbled":
        return f"{reporting.MARKER} {draw(st.text(max_size=60))}"
    if kind == "cut":
        line = reporting.encoded_lines(draw(st.lists(points, min_size=1, max_size=5)))[0].decode()
        return line[:draw(st.integers(0, len(line)))]
    if kind == "deep":
        depth = draw(st.integers(1, 100_000))
        return f"{reporting.MARKER} {'[' * depth}{']' * draw(st.integers(0, depth))}"
    return draw(st.text(max_size=30)) + reporting.encoded_lines([draw(points)])[0].decode()  # glued to output


@fuzz(500)
@given(line=hostile_lines())
def test_a_hostile_line_yields_only_points_a_report_writes(line):
    COUNTS["cases"] += 1
    for moment, step, total, metrics in reporting.points_of(line):
        assert math.isfinite(moment) and type(moment) is float
        assert all(count is None or (type(count) is int and count >= 0) for count in (step, total))
        assert len(metrics) <= reporting.MAX_METRICS
        assert all(type(name) is str and len(name) <= reporting.MAX_NAME_CHARS and type(value) is float
                   for name, value in metrics.items())


@fuzz(200)
@given(step=anything, total=anything, metrics=st.dictionaries(st.text(max_size=80), anything, max_size=40))
def test_report_never_raises(step, total, metrics):
    COUNTS["cases"] += 1
    count = reporting.checked_count(step, "step")
    assert count is None or (type(count) is int and count == step and count >= 0)
    checked = reporting.checked_metrics(metrics)
    assert len(checked) <= reporting.MAX_METRICS and all(type(value) is float for value in checked.values())
    reporting.report(step=step, total=total, **{f"m{index}": value for index, value in enumerate(metrics.values())})


@fuzz(300)
@given(text=st.one_of(st.text(max_size=200), anything.map(json.dumps)))
def test_an_annotation_edited_by_hand_reads_back_or_is_none(text):
    COUNTS["cases"] += 1
    resource = {"kind": "PyTorchJob", "metadata": {"name": "j", "annotations": {PROGRESS_ANNOTATION: text}},
                "spec": {"pytorchReplicaSpecs": {}},
                "status": {"conditions": [{"type": "Running", "status": "True"}]}}
    progress = from_annotation(JobDetails(resource))
    if progress is not None:
        assert isinstance(progress.cell(), str) and all(isinstance(line, str) for line in progress.lines())


def a_finished_job() -> Path:
    """A local job that ran and ended, created once per test: its progress file is what the cases write."""
    from trainctl import Client

    home = Path(os.environ["TRAINCTL_HOME"])
    progress = home / "jobs" / "default" / "hostile" / "logs" / "worker-0.progress"
    if not progress.parent.is_dir():
        client = Client("local")
        client.run(["python", "-c", "pass"], framework="jax", name="hostile").wait(timeout=60, progress=False)
    return progress


@fuzz(60)
@given(lines=st.lists(hostile_lines(), max_size=8), junk=st.binary(max_size=200))
def test_a_job_whose_progress_file_holds_anything_still_shows_and_plots_or_says_why(lines, junk):
    progress = a_finished_job()
    progress.write_bytes(junk + "\n".join(lines).encode(errors="replace") + b"\n")
    assert run("status", "hostile").code == 0
    assert "hostile" in run("list").stdout
    plotted = run("plot", "hostile", "-o", "curve.png")
    COUNTS[f"plot exit {plotted.code}"] += 1


def test_plot_draws_at_most_one_image_of_panels_and_names_what_it_left_out():
    metrics = {f"grad_norm/layer{index:02}": 0.5 for index in range(20)}
    a_finished_job().write_text(f"{reporting.MARKER} {json.dumps([[1.0, 1, 2, metrics], [2.0, 2, 2, metrics]])}\n")
    plotted = run("plot", "hostile", "-o", "curve.png")
    assert plotted.code == 0 and "wrote 2 point(s) of hostile to curve.png" in plotted.stderr
    assert ("4 more metric(s) not drawn (grad_norm/layer16, grad_norm/layer17, grad_norm/layer18, ...): one image "
            "draws at most 16; choose with --metric NAME") in plotted.stderr
    named = run("plot", "hostile", "-o", "curve.png", *[f"--metric=grad_norm/layer{index:02}" for index in range(17)])
    assert named.code == 2 and named.stderr == ("error: --metric names 17 metrics: one image draws at most 16, so "
                                                "draw them in several\n")


def test_a_progress_file_that_is_a_fifo_or_a_link_to_a_device_is_not_read():
    progress = a_finished_job()
    for make in (os.mkfifo, lambda path: path.symlink_to("/dev/zero")):
        progress.unlink(missing_ok=True)
        make(progress)
        started = time.monotonic()
        shown = run("status", "hostile")
        assert shown.code == 0 and "progress:" not in shown.stdout
        assert time.monotonic() - started < 5  # neither blocked on the FIFO nor read /dev/zero for ever
