"""Fuzzing the kept record's decoder (issue 26): a record is a ConfigMap anyone who may write ConfigMaps in the
namespace could have written, so whatever it holds, readers get this job's record, or None, never an exception;
and what a reader then does with a record it accepted (its rows, its log lines, its reports) never raises either.
"""

from __future__ import annotations

import base64
import gzip
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import COUNTS, fuzz
from trainctl.backends.kube import records as fmt

pytestmark = pytest.mark.fuzz

UID = "job-uid"
anything = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12)),
                        lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                        max_leaves=16)
stamps = st.sampled_from([b"2026-01-02T03:04:05.000000000Z ", b"garbage ", b"", b"2026-13-45T99:99:99.9Z "])
log_lines = st.lists(st.tuples(stamps, st.binary(max_size=40)), max_size=20).map(
    lambda lines: b"".join(stamp + text.replace(b"\n", b"") + b"\n" for stamp, text in lines))


def mostly(draw, valid: object, hostile: st.SearchStrategy) -> object:
    """``valid`` four times in five, else something ``hostile`` draws: most records get past the first check."""
    return valid if draw(st.integers(0, 4)) < 4 else draw(hostile)  # Hypothesis draws 0 most: valid


def run_data(draw) -> object:
    valid = {"pod": "mnist-master-0", "podUID": "p", "restart": 0, "exitCode": 1, "reason": "Error", "signal": None,
             "message": "m", "startedAt": "2026-01-02T03:04:05Z", "finishedAt": "2026-01-02T03:04:06Z",
             "read": 10, "kept": 10, "lost": "", "deleted": False}
    mutated = st.builds(lambda key, value: {**valid, key: value}, st.sampled_from(sorted(valid)), anything)
    return mostly(draw, valid, st.one_of(mutated, anything))


@st.composite
def blobs(draw) -> str:
    kind = draw(st.sampled_from(["log", "bomb", "garbled", "not base64", "cut"]))
    if kind == "log":
        data = gzip.compress(draw(log_lines))
    elif kind == "bomb":
        data = gzip.compress(b"a" * draw(st.sampled_from([1 << 20, 3 << 20, 20 << 20])))
    elif kind == "cut":
        data = gzip.compress(draw(log_lines))[:draw(st.integers(0, 20))]
    else:
        data = draw(st.binary(max_size=64))
    return "%%%" if kind == "not base64" else base64.b64encode(data).decode()


@st.composite
def hostile_config_maps(draw) -> object:
    if draw(st.integers(0, 9)) == 0:
        return draw(anything)
    annotation = {"replica": mostly(draw, "master-0", st.sampled_from(["worker-0", 7, None])),
                  "runs": [run_data(draw) for _ in range(draw(st.integers(0, 3)))],
                  "lastOutput": draw(st.one_of(st.none(), st.floats(), st.integers(), st.text(max_size=5)))}
    annotated = mostly(draw, json.dumps(annotation), st.sampled_from([json.dumps(annotation)[:-3],
                                                                       "[" * 5000 + "]" * 5000]))
    owner = {"controller": mostly(draw, True, st.sampled_from([False, "true", None])),
             "uid": mostly(draw, UID, st.sampled_from(["x", 5, None]))}
    metadata = {"name": "mnist-master-0.trainctl-record",
                "labels": mostly(draw, {fmt.RECORD_LABEL: fmt.FORMAT}, st.sampled_from([{}, None, "x"])),
                "annotations": {fmt.RECORD_ANNOTATION: annotated},
                "ownerReferences": mostly(draw, [owner], st.sampled_from([[owner, owner], [], None, {}])),
                "resourceVersion": draw(st.sampled_from(["1", 2, None]))}
    keys = st.sampled_from([*fmt.LOG_KEYS, fmt.REPORTS_KEY, fmt.RESULT_KEY, "other"])
    binary = {key: base64.b64encode(gzip.compress(draw(log_lines))).decode()
              for key in fmt.LOG_KEYS[:draw(st.integers(0, 2))]}
    if draw(st.integers(0, 2)) == 0:  # a third of them carry a hostile blob too
        binary[draw(keys)] = draw(blobs())
    return {"metadata": metadata, "binaryData": binary}


@fuzz(400)
@given(config_map=hostile_config_maps(), previous=st.booleans())
def test_a_hostile_record_is_this_jobs_or_none_and_reading_it_never_raises(config_map, previous):
    COUNTS["cases"] += 1
    record = fmt.decoded(config_map, UID, "master-0")
    listed = fmt.listed_runs(config_map.get("metadata") if isinstance(config_map, dict) else config_map)
    assert listed is None or isinstance(listed[2], frozenset)
    if record is None:
        return
    assert len(record.runs) <= fmt.MAX_RUNS and record.replica == "master-0"
    record.report_lines()
    record.result_line()
    if record.runs:
        fmt.kept_row("mnist-master-0", "Master", 0, record.runs, job_finished=True)
        shown = fmt.shown(record, None, "pytorch", previous)
        if shown is not None:
            for tail in (None, 3):
                data = b"".join(chunk.data for chunk in fmt.kept_chunks(
                    shown, "master-0", tail=tail, since_seconds=60, keep_stamps=False))
                assert data.startswith(b"(kept record: ")
