"""Reading a function job's result line back: data only, unless the caller trusts the job with pickle.

:mod:`trainctl.functions.runner` prints rank 0's return value as tagged JSON (see its docstring).
:func:`value_of` turns such a line back into the value, building only the types the tags name
(tuples, sets, dicts, bytes, floats, numpy arrays of numbers, torch tensors) from their data:
whatever the line holds, decoding it never looks up a class by name and never runs code, so a line
forged by anyone who could write the job's logs yields, at worst, a wrong value or a one-line error.
A pickled line (a job run with ``pickle_result=True``) is unpickled only with ``allow_pickle=True``.

Of a job's log lines, the last result line counts (:func:`value_in`): rank 0 prints it after
everything its function printed, on a line of its own, so no output before it (a line without
its newline, one that merely looks like a result line) can hide it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from typing import Protocol, TypeVar

from trainctl.errors import UserError
from trainctl.functions.runner import MARKER, MARKERS, NUMERIC_DTYPE_KINDS, PICKLE_MARKER
from trainctl.reporting import MARKER as PROGRESS_MARKER


class Line(Protocol):
    """A log line as a backend reads it (trainctl.backends.base.LogLine): whose, and what it says."""

    replica: str
    text: str


LogLine = TypeVar("LogLine", bound=Line)
CONTAINERS = {"$tuple": tuple, "$set": set, "$frozenset": frozenset}


class BadResult(UserError):
    """A result line that does not decode: garbled, truncated or forged."""


def value_in(texts: Iterable[str], allow_pickle: bool, job: str) -> tuple[object] | None:
    """``(value,)`` of the last result line among ``texts`` (a job's log lines, in order); None without one."""
    last = None
    for text in texts:
        if text.partition(" ")[0] in (MARKER, PICKLE_MARKER):
            last = text
    return None if last is None else value_of(last, allow_pickle, job)


def without_plumbing(lines: Iterable[LogLine]) -> Iterator[LogLine]:
    """The log lines a person reads: no result line, nor the empty line its leading newline makes after a
    finished line (function_runner.on_its_own_line), nor a progress report a pod wrote to its log
    (trainctl.reporting). An empty line waits for its replica's next line to say which it is."""
    held: dict[str, list[LogLine]] = {}
    for line in lines:
        waiting = held.pop(line.replica, [])
        if line.text.startswith(MARKERS):
            yield from waiting[:-1]  # the last empty line before a result line is the runner's
        elif line.text.startswith(PROGRESS_MARKER):
            held[line.replica] = waiting  # reports come and go between the program's lines
        elif line.text == "":
            held[line.replica] = [*waiting, line]
        else:
            yield from waiting
            yield line
    for waiting in held.values():
        yield from waiting


def value_of(text: str, allow_pickle: bool, job: str) -> tuple[object] | None:
    """``(value,)`` when ``text`` is a result line; None for any other line; :class:`BadResult` for a line
    that says it is a result and is not one, or a pickled one the caller did not allow."""
    marker, _, payload = text.partition(" ")
    if marker == MARKER:
        try:
            return (decoded(json.loads(payload)),)
        except ImportError as error:  # numpy or torch, for an array: not a forgery, a missing library
            raise BadResult(f"job {job}'s result holds a {error.name} value: install {error.name} to read it") from None
        except (ValueError, TypeError, KeyError, RecursionError, binascii.Error) as error:
            raise BadResult(f"job {job}'s result line does not decode ({type(error).__name__}: "
                            f"{str(error)[:200]}): it was garbled, cut, or not printed by trainctl's runner") from None
    if marker == PICKLE_MARKER:
        return (unpickled(payload, job) if allow_pickle else refuse_pickle(job),)
    return None


def decoded(data: object) -> object:
    """The value ``data`` (parsed JSON) encodes; ValueError/TypeError/KeyError for anything else."""
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decoded(item) for item in data]
    if type(data) is not dict or len(data) not in (1, 2):
        raise ValueError(f"an untagged {type(data).__name__}")
    tag = next(iter(data))
    if tag in CONTAINERS:
        return CONTAINERS[tag](decoded(item) for item in listed(data[tag]))
    if tag == "$dict":
        return {decoded(key): decoded(item) for key, item in (pair(entry) for entry in listed(data[tag]))}
    if tag == "$bytes":
        return base64.b64decode(text(data[tag]), validate=True)
    if tag == "$float":
        return float(text(data[tag]))  # 'nan', 'inf', '-inf': float() parses numbers only
    if tag == "$numpy":
        array = numpy_array(data[tag])
        return array[()] if data.get("scalar") is True else array
    if tag == "$torch":
        import torch

        return torch.from_numpy(numpy_array(data[tag]).copy())  # copy: frombuffer's array is read-only
    raise ValueError(f"an unknown tag {str(tag)[:40]!r}")


def numpy_array(data: object):
    """An array of numbers from its dtype, shape and raw bytes; the dtype must be a plain numeric one."""
    import numpy

    if type(data) is not dict:
        raise ValueError("an array that is not an object")
    dtype = numpy.dtype(text(data["dtype"]))
    if dtype.kind not in NUMERIC_DTYPE_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"an array of {dtype}, not of numbers")
    shape = tuple(listed(data["shape"]))
    if not all(type(size) is int and size >= 0 for size in shape):
        raise ValueError(f"an array shape {shape!r}")
    return numpy.frombuffer(base64.b64decode(text(data["data"]), validate=True), dtype=dtype).reshape(shape)


def listed(data: object) -> list:
    if type(data) is not list:
        raise ValueError(f"a {type(data).__name__} where a list belongs")
    return data


def pair(data: object) -> list:
    if len(listed(data)) != 2:
        raise ValueError("a dict entry that is not a [key, value] pair")
    return data


def text(data: object) -> str:
    if type(data) is not str:
        raise ValueError(f"a {type(data).__name__} where a string belongs")
    return data


def unpickled(payload: str, job: str) -> object:
    import pickle

    try:
        return pickle.loads(base64.b64decode(payload, validate=True))
    except Exception as error:  # the caller trusted the job; a damaged pickle still ends in one line
        raise BadResult(f"job {job}'s pickled result does not load ({type(error).__name__}: {error})") from None


def refuse_pickle(job: str):
    raise BadResult(f"job {job}'s result is a pickle, which can run any code when loaded: call "
                    "result(allow_pickle=True) only if you trust everyone who can create or change jobs in its "
                    "namespace and every replica of this job (docs/python-api.md: what result() trusts)")
