"""Fuzzing a function job's result line (trainctl.functions.results) and the SDK keywords that carry values through.

Result lines: every value of the supported types comes back equal and of the same type; any other
line (garbled, cut, forged JSON with made-up tags, a pickle, a pickle inside JSON) gives None, or one
BadResult line, and never reaches pickle: ``pickle.loads`` is replaced by a tripwire while they run.
Whatever the function printed before its result (no final newline, ``\r``, colour codes, lines that
look like result lines), the value read back from the log is the one it returned.
Keywords: ``env`` and ``packages`` values come through unchanged into the rendered job, or are
refused in one InvalidArgument line; ``selector`` and ``pickle_result`` likewise.
"""

from __future__ import annotations

import base64
import json
import math
import os
import pickle
from pathlib import Path

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import COUNTS, fuzz
from tests.fuzz.test_run_fuzz import mostly, python_values, train
from trainctl import Client, InvalidArgument
from trainctl.backends.base import LogChunk, lines_of
from trainctl.functions.results import BadResult, value_in, value_of
from trainctl.functions.runner import MARKER, PICKLE_MARKER, on_its_own_line, result_line

pytestmark = pytest.mark.fuzz

hashable = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6), st.binary(max_size=6),
                                  st.floats(allow_nan=False)),
                        lambda inner: st.one_of(st.tuples(inner, inner), st.frozensets(inner, max_size=3)),
                        max_leaves=5)
numeric_dtypes = st.sampled_from(["bool", "int8", "uint16", "<i4", ">i8", "float32", ">f8", "complex64"])
arrays = st.builds(lambda dtype, data, shape: numpy.frombuffer(data[:len(data) - len(data) % numpy.dtype(dtype).itemsize],
                                                               dtype=dtype).reshape(-1, *shape),
                   numeric_dtypes, st.binary(max_size=48), st.sampled_from([(), (1,)]))
values = st.recursive(st.one_of(hashable, arrays, arrays.map(lambda array: array.ravel()[:1]).filter(len)
                                .map(lambda array: array[0])),
                      lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner),
                                              st.sets(hashable, max_size=3),
                                              st.dictionaries(hashable, inner, max_size=3)),
                      max_leaves=8)


def same(left, right) -> bool:
    """Equal and of the same type all the way down (an array's dtype and shape too)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, numpy.ndarray):
        return left.dtype == right.dtype and left.shape == right.shape and left.tobytes() == right.tobytes()
    if isinstance(left, numpy.generic):
        return left.dtype == right.dtype and left.tobytes() == right.tobytes()
    if isinstance(left, (list, tuple)):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right))
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same(item, right[key]) for key, item in left.items())
    return left == right


@fuzz(300)
@given(value=values)
def test_a_returned_value_comes_back_as_it_was(value):
    COUNTS["cases"] += 1
    [decoded] = value_of(result_line(value), allow_pickle=False, job="j")
    assert same(decoded, value), (value, decoded)


def test_floats_json_lacks_come_back():
    [decoded] = value_of(result_line([math.inf, -math.inf, math.nan]), allow_pickle=False, job="j")
    assert decoded[:2] == [math.inf, -math.inf] and math.isnan(decoded[2])


class Tripwire:
    def __reduce__(self):
        return os.system, ("touch /nonexistent-trainctl-tripwire",)


tripwire = base64.b64encode(pickle.dumps(Tripwire())).decode()
tags = st.sampled_from(["$tuple", "$set", "$frozenset", "$dict", "$bytes", "$float", "$numpy", "$torch", "$pickle",
                        "$reduce", "dtype", "shape", "data", "scalar"])
forged_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8), st.just(tripwire),
              st.sampled_from(["O", "V8", "<U3", "|b1", "i4", "[('a', 'i4')]", "object", "nan", "1e999"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(tags, inner, max_size=3),
                            st.dictionaries(st.text(max_size=4), inner, max_size=2)),
    max_leaves=10)


@st.composite
def hostile_lines(draw) -> str:
    kind = draw(st.sampled_from(["json", "garbled", "cut", "pickle", "text"]))
    if kind == "json":
        return f"{MARKER} {json.dumps(draw(forged_json))}"
    if kind == "garbled":
        return f"{MARKER} {draw(st.text(max_size=40))}"
    if kind == "cut":
        line = result_line(draw(values))
        return line[:draw(st.integers(len(MARKER), len(line)))]
    if kind == "pickle":
        return f"{PICKLE_MARKER} {draw(st.sampled_from([tripwire, '', '!!', 'gASVAAAA']))}"
    return draw(st.text(max_size=40)).replace("\n", " ")


@fuzz(500)
@given(line=hostile_lines())
def test_a_hostile_line_never_reaches_pickle(line):
    def tripped(*_):
        raise AssertionError(f"pickle.loads reached by {line[:80]!r}")

    COUNTS["cases"] += 1
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(pickle, "loads", tripped)
        try:
            outcome = value_of(line, allow_pickle=False, job="j")
        except BadResult as refused:
            COUNTS["result line refused"] += 1
            assert "\n" not in refused.message and refused.message.startswith("job j's result"), refused.message
        else:
            assert outcome is None or (isinstance(outcome, tuple) and line.startswith(MARKER + " ")), line


output_pieces = st.one_of(st.text(max_size=30), st.sampled_from(
    ["\r", "\n", "\x1b[0m", "\x1b[33mWARNING\x1b[0m", "epoch done", MARKER + " ", PICKLE_MARKER + " ",
     f"{MARKER} [", f"\n{MARKER} {{\"$tuple\": 1}}\n", "trainctl-result:v1 00 gASV"]))


@fuzz(400)
@given(before=st.lists(output_pieces, max_size=8).map("".join), value=values)
def test_output_before_the_result_line_never_loses_it(before, value):
    """rank 0's log: anything its function printed, then what the runner prints, split as a backend splits it."""
    COUNTS["cases"] += 1
    log = (before + on_its_own_line(result_line(value))).encode()
    [decoded] = value_in((line.text for line in lines_of([LogChunk("master-0", log)])), allow_pickle=False, job="j")
    assert same(decoded, value), (before, value, decoded)


env_values = mostly(st.dictionaries(st.sampled_from(["A", "LR", "B_2"]), st.one_of(
    st.text("abc 0.1=", max_size=5), st.integers(), st.floats(allow_nan=False, allow_infinity=False)), max_size=3),
    st.dictionaries(st.sampled_from(["A", "LR"]), python_values, max_size=2))


@fuzz(300)
@given(env=env_values, packages=mostly(st.lists(st.sampled_from(["numpy", "pandas>=2"]), max_size=2), python_values),
       pickle_result=mostly(st.booleans(), python_values))
def test_env_and_packages_pass_through_or_are_refused(env, packages, pickle_result):
    home = Path(os.environ["TRAINCTL_HOME"])
    COUNTS["cases"] += 1
    try:
        resource = Client("local").run(train, env=env, packages=packages, pickle_result=pickle_result, dry_run=True)
    except InvalidArgument as refused:
        COUNTS["run() refused"] += 1
        assert "\n" not in str(refused) and str(refused).strip(), repr(refused)
        assert any(word in str(refused) for word in ("env", "packages", "pickle_result", "pip")), str(refused)
        return
    container = resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    rendered = {item["name"]: item["value"] for item in container.get("env", [])}
    for key, value in env.items():
        assert rendered[key] == str(value), (key, value, rendered)
    assert type(pickle_result) is bool
    assert not home.exists(), "a dry run wrote something"


@fuzz(100)
@given(selector=mostly(st.sampled_from(["team=ml", "a in (b)", ""]), python_values))
def test_a_selector_is_used_or_refused_in_one_line(selector):
    COUNTS["cases"] += 1
    try:
        assert Client("local").jobs(selector=selector) == []
    except InvalidArgument as refused:
        assert "\n" not in str(refused) and "selector" in str(refused), str(refused)
