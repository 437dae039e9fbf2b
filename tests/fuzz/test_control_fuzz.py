"""Fuzzing what a replica writes against the terminal that reads trainctl's summaries (issue 43).

Whatever bytes a replica prints (its log's tail, its termination message) and whatever names it reports metrics
under, and whatever a cluster's events say, none of trainctl's own output made of them (``status`` into a pipe,
the failure summary that ``wait``, ``submit --wait``, ``export`` and ``JobFailed`` print, the progress line, wait's
bar) holds an ESC, a BEL or a C1 control: nothing in it can drive a terminal.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import fuzz
from tests.unit.test_control_characters import Client, details, reports_backend, status_output
from trainctl.backends.reported import job_progress
from trainctl.functions.runner import RAISED_MARKER
from trainctl.reporting import MAX_NAME_CHARS
from trainctl.sdk.progress import bar_text

pytestmark = pytest.mark.fuzz

DRIVES_A_TERMINAL = re.compile("[\x1b\x07\x80-\x9f]")  # ESC, BEL and the C1 controls (CSI, OSC, NEL ...)
pieces = st.sampled_from([b"\x1b", b"\x07", b"\r", b"\n", b"\x1b]0;title\x07", b"\x1b[2J", b"\x9b", "\x9b".encode(),
                          "\x85".encode(), b"\xc2", b"\x7f", b"\x00", b"[bold]", b"\\", "\u00e9".encode()])
printed = st.lists(st.one_of(pieces, st.binary(max_size=12)), max_size=16).map(b"".join)
texts = st.lists(st.one_of(pieces.map(lambda piece: piece.decode(errors="replace")), st.text(max_size=8)),
                 max_size=8).map("".join)


def log_lines(data: bytes) -> list[str]:
    """A replica's output as the backends read it back (trainctl.backends.base.lines_of)."""
    return data.decode(errors="replace").split("\n")


@fuzz(100)
@given(output=printed, exception=texts, names=st.lists(texts.map(lambda name: name[:MAX_NAME_CHARS]), max_size=3),
       event=texts)
def test_nothing_a_replica_writes_reaches_the_summaries_as_a_control(output, exception, names, event):
    found = details(event_message=event)
    record = f"{RAISED_MARKER} {json.dumps({'time_ns': 5, 'exception': exception, 'rank': None})}"
    found.replicas[0] = found.replicas[0]._replace(message=f"{record}\n{output.decode(errors='replace')}")
    metrics = {name: float(index) for index, name in enumerate(names)}
    client = Client(found, log_lines(output), metrics)
    with pytest.MonkeyPatch.context() as patch:
        shown = [status_output(patch, terminal=False, client=client)]
    shown += [str(client.failure_summary("demo", "ml")),
              bar_text(job_progress(reports_backend(time.time(), metrics), found))]
    for text in shown:
        assert not DRIVES_A_TERMINAL.search(text), ascii(text)
