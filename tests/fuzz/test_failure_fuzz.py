"""Fuzzing the evidence a failure summary and the Failed condition are judged by (trainctl/core/attribution.py).

A replica writes its own log and termination message, so both are hostile input: forged or garbled
records, tracebacks cut anywhere, control characters, lines of any length. Whatever they hold, the
verdict is reached without an exception, names a replica of the job, and every sentence it makes is
one printable line of bounded length (it becomes a condition's message and a summary's headline).
What the function runner records of a raised exception comes back as the same first line.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import fuzz
from trainctl.core.attribution import MAX_EXCEPTION_CHARS, Run, attribute, one_line, raised_records
from trainctl.functions import runner as function_runner
from trainctl.functions.runner import RAISED_MARKER

pytestmark = pytest.mark.fuzz

json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30)),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                           max_leaves=6)
records = st.fixed_dictionaries({}, optional={"time_ns": st.one_of(st.integers(), json_values),
                                              "exception": st.one_of(st.text(), json_values),
                                              "rank": st.one_of(st.none(), st.text(max_size=5), json_values)})
lines = st.one_of(
    st.text(max_size=200).map(lambda text: text.replace("\n", " ")),
    st.sampled_from(["Traceback (most recent call last):", "[rank1]: Traceback (most recent call last):",
                     '  File "x.py", line 1', "RuntimeError: Connection closed by peer", "ValueError: x",
                     "gloo/transport/tcp/pair.cc:1] Connection reset by peer", "trainctl: f() raised KeyError: 'a'",
                     "prterun noticed that process rank 1 with PID 2 on node n exited on", "\x1b[31mred\x1b[0m"]),
    records.map(lambda record: f"{RAISED_MARKER} {json.dumps(record)}"),
    st.text(max_size=20).map(lambda text: f"{RAISED_MARKER}{text}"),
)
runs = st.builds(Run, replica=st.sampled_from(["master-0", "worker-0", "worker-1", "launcher"]),
                 exit_code=st.one_of(st.none(), st.integers(-300, 300)), reason=st.sampled_from(["", "Error",
                                                                                             "OOMKilled"]),
                 finished=st.one_of(st.none(), st.sampled_from(["2026-01-01T00:00:05Z", "not a time", ""])),
                 previous=st.booleans(), exit_window=st.one_of(st.none(), st.tuples(st.floats(0, 10), st.floats(0, 10))),
                 message=st.lists(lines, max_size=4).map("\n".join), stopped=st.booleans(),
                 log=st.lists(lines, max_size=12).map(tuple))
kinds = st.sampled_from(["PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob"])


def one_printable_line(text: str, limit: int) -> bool:
    return text.isprintable() and len(text) <= limit


@fuzz(400)
@given(found_runs=st.lists(runs, max_size=5), kind=kinds)
def test_any_evidence_gives_a_verdict_in_one_printable_line(found_runs, kind):
    found = attribute(found_runs, kind)
    assert len(found.causes) + len(found.consequences) == len(found_runs)
    replicas = {run.replica for run in found_runs}
    culprit = found.culprit
    assert culprit is None if not found_runs else culprit.run.replica in replicas
    sentence = found.sentence()
    assert one_printable_line(sentence, 8 * MAX_EXCEPTION_CHARS), sentence
    for judged in found.causes + found.consequences:
        assert one_printable_line(judged.sentence(), 2 * MAX_EXCEPTION_CHARS), judged.sentence()


@fuzz(300)
@given(record=records)
def test_a_record_is_taken_only_with_its_fields_of_the_right_types(record):
    taken = raised_records([f"{RAISED_MARKER} {json.dumps(record)}"])
    well_formed = (type(record.get("time_ns")) is int and isinstance(record.get("exception"), str)
                   and isinstance(record.get("rank"), (str, type(None))))
    assert taken == ([record] if well_formed else [])


@fuzz(200)
@given(message=st.text(max_size=800))
def test_what_the_runner_records_comes_back_as_its_first_line(message, tmp_path_factory):
    path = tmp_path_factory.mktemp("termination") / "message"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(function_runner.TERMINATION_LOG_ENV, str(path))
        function_runner.record_raise(RuntimeError(message), {})
    [record] = raised_records(path.read_text().splitlines())
    expected = function_runner.described(RuntimeError(message)).splitlines()[0][:function_runner.MAX_RECORDED_CHARS]
    assert record["exception"] == expected
    judged = attribute([Run("worker-0", 1, message=path.read_text())], "PyTorchJob").culprit
    assert judged.exception == one_line(expected)
