"""Issue 54, classes 2 and 3: a line of any length, and a value of any length, reach the reader bounded and said
to be cut; no character that reorders or hides text (bidi controls, zero-width and other format characters)
reaches a terminal raw.

A long line in a replica's log (a tqdm bar: one line of carriage-return updates, written for an hour) is read
in bounded pieces and shown as its last :data:`CHUNK_BYTES`, with a note; the failure summary cuts each line of
its log tail; an error message echoes a value as ``--name`` is echoed, shortened.
"""

from __future__ import annotations

import os

import pytest

from trainctl.backends.base import lines_of
from trainctl.backends.local.logs import CHUNK_BYTES, LINE_CUT, read_logs
from trainctl.backends.local.store import JobDir
from trainctl.errors import MAX_MESSAGE_CHARS, UserError, shortened, visible
from trainctl.sdk.failures import LOG_LINE_CHARS

T0 = 1_700_000_000.0
BAR = b"\r 50%|#####     | 5/10"  # one update of a progress bar, as tqdm rewrites its line


# ---- errors.visible: bidi controls and format characters -----------------------------------------------------

def test_bidi_controls_and_format_characters_are_shown_escaped():
    assert visible("ok \u202eevil\u202c done") == "ok <U+202E>evil<U+202C> done"  # Trojan Source: RLO ... PDF
    assert visible("\u2066\u2067\u2068\u2069\u202a\u202b\u202d") == \
        "<U+2066><U+2067><U+2068><U+2069><U+202A><U+202B><U+202D>"
    assert visible("zero\u200bwidth\u200d joiner\ufeff bom\u00ad soft") == \
        "zero<U+200B>width<U+200D> joiner<U+FEFF> bom<U+00AD> soft"
    assert visible("line\u2028separator") == "line<U+2028>separator"
    assert visible("\x1b[31m\u202e\t") == "^[[31m<U+202E>\t"  # the C0 controls as before, the tab stays
    assert visible("plain é 漢 👍 \u00a0nbsp") == "plain é 漢 👍 \u00a0nbsp"


def test_an_error_message_shows_a_bidi_control_escaped():
    assert UserError("bad value 'a\u202eb'").message == "bad value 'a<U+202E>b'"


# ---- error messages: a value of any length is echoed shortened --------------------------------------------------

def test_a_huge_value_is_echoed_shortened_as_a_name_is():
    from trainctl.submit.options import env_pairs, label_map, volumes

    huge = "x" * 100_000
    for call in (lambda: label_map([f"a={huge}"], "label"), lambda: label_map([f"{huge}=v"], "label"),
                 lambda: env_pairs([f"9{huge}=1"]), lambda: env_pairs([huge]), lambda: volumes([f"pvc:{huge}:/d"])):
        with pytest.raises(UserError) as raised:
            call()
        assert len(raised.value.message) < 400 and "xxx..." in raised.value.message, raised.value.message[:500]


def test_no_error_message_is_longer_than_its_bound_whatever_it_quotes():
    words = UserError(f"--label a={'word ' * 100_000}: the value is bad: use at most 63 characters").message
    assert len(words) <= MAX_MESSAGE_CHARS and words.endswith("use at most 63 characters")
    assert "characters cut]" in words
    one_word = UserError(f"--annotation {'y' * 100_000!r}: bad").message
    assert len(one_word) < 300 and one_word.endswith("y...yyyyyyyy': bad")  # the word's end kept: its quote
    assert shortened("abc", 80) == "abc" and shortened("a" * 100, 10) == "aaaaaaa..."
    assert shortened("a" * 100 + "bc", 10, end=2) == "aaaaa...bc"


# ---- a long line in a replica's log -----------------------------------------------------------------------------

@pytest.fixture
def job_dir(tmp_path) -> JobDir:
    return JobDir("default", "mnist", root=tmp_path)


def write_bar_log(job_dir: JobDir, updates: int, ending: bytes = b"\n") -> bytes:
    """A log of a line, a progress bar's line of ``updates`` updates (noted in the index every 64 KiB, as the
    supervisor notes one a second while it grows) ending in 100%, and a last line; the bar's line."""
    bar = BAR * updates + b"\r100%|##########| 10/10"
    data = b"starting\n" + bar + ending + (b"done\n" if ending else b"")
    job_dir.logs.mkdir(parents=True)
    job_dir.log_file("master-0").write_bytes(data)
    job_dir.offsets_file("master-0").write_text(
        "".join(f"{T0 + second} {size}\n" for second, size in enumerate(range(4096, len(data), 64 << 10))))
    os.utime(job_dir.log_file("master-0"), (T0 + 999, T0 + 999))
    return bar


def test_a_line_longer_than_a_chunk_written_over_many_seconds_is_read_cut_to_its_end(job_dir):
    bar = write_bar_log(job_dir, updates=3 * CHUNK_BYTES // len(BAR))
    lines = list(lines_of(read_logs(job_dir, ["master-0"], None, False)))
    assert [line.text[:20] for line in lines][::2] == ["starting", "done"]
    shown = lines[1].text.encode()
    assert shown == bar[-CHUNK_BYTES:] + LINE_CUT.rstrip(b"\n")
    assert visible(lines[1].text).startswith("100%|##########| 10/10 [trainctl: ")  # the bar's last state, and the cut
    assert lines[1].time == lines[2].time or lines[1].time < lines[2].time
    assert [line.text for line in lines_of(read_logs(job_dir, ["master-0"], 1, False))] == ["done"]


@pytest.mark.parametrize("ending", [b"\n", b""], ids=["newline", "unfinished"])
def test_the_tail_of_a_log_ending_in_a_huge_line_reads_only_its_end(job_dir, ending):
    bar = write_bar_log(job_dir, updates=3 * CHUNK_BYTES // len(BAR), ending=ending)
    if ending:  # the huge line is not the last: leave "done" out
        job_dir.log_file("master-0").write_bytes(job_dir.log_file("master-0").read_bytes()[:-5])
    for tail in (1, 2):
        chunks = list(read_logs(job_dir, ["master-0"], tail, False))
        assert b"".join(chunk.data for chunk in chunks) == bar[-CHUNK_BYTES:] + LINE_CUT, tail


# ---- the failure summary's log tail --------------------------------------------------------------------------------

def test_the_failure_summarys_log_tail_is_cut_in_characters_and_says_so():
    from tests.unit.test_control_characters import details
    from trainctl.sdk.failures import summarize

    huge = "z" * (20 << 20)
    summary = summarize(details(), lambda runs: [["before", huge, "after"] for _ in runs])
    text = str(summary)
    assert len(text) < 20 * (LOG_LINE_CHARS + 100), len(text)
    cut = f"    | {'z' * LOG_LINE_CHARS}... [{len(huge) - LOG_LINE_CHARS} more characters cut]"
    assert cut in text.split("\n") and "    | after" in text
