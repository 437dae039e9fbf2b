"""Log reading and printing without processes: time-ordered merging, timestamps, --tail/--since,
--replica by pod name, the prefixing writer, and splitting Kubernetes logs by their timestamps."""

from __future__ import annotations

import io
import os
import time

import pytest

from trainctl.backends.base import LogChunk, lines_of, pick_replica, prefix_lines
from trainctl.backends.kube.logs import merged, split_by_stamp, whole_lines, without_stamps
from trainctl.backends.local.logs import read_logs
from trainctl.backends.local.store import JobDir
from trainctl.cli.logs import PrefixWriter
from trainctl.errors import UserError

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def write_log(job_dir: JobDir, replica: str, timed_lines: list[tuple[float, str]], tail: str = "") -> None:
    """A replica's log and its offsets index as the supervisor writes them: one entry per write time."""
    job_dir.logs.mkdir(parents=True, exist_ok=True)
    text, index = "", []
    for written_at, line in timed_lines:
        text += line + "\n"
        index.append(f"{written_at:.3f} {len(text.encode())}\n")
    job_dir.log_file(replica).write_text(text + tail)
    job_dir.offsets_file(replica).write_text("".join(index) + "1700000099.5 12")  # a line still being written
    last = timed_lines[-1][0] if timed_lines else T0  # the last write; the index notes it a moment later
    os.utime(job_dir.log_file(replica), (last, last))


@pytest.fixture
def job_dir(tmp_path) -> JobDir:
    return JobDir("default", "mnist", root=tmp_path)


def texts(chunks) -> list[tuple[str, str]]:
    return [(line.replica, line.text) for line in lines_of(chunks)]


def test_replicas_are_merged_in_the_order_their_lines_were_written(job_dir):
    write_log(job_dir, "master-0", [(T0 + 1, "m1"), (T0 + 3, "m3"), (T0 + 3, "m3b")])
    write_log(job_dir, "worker-0", [(T0 + 2, "w2"), (T0 + 4, "w4")])
    assert texts(read_logs(job_dir, ["master-0", "worker-0"], None, False)) == [
        ("master-0", "m1"), ("worker-0", "w2"), ("master-0", "m3"), ("master-0", "m3b"), ("worker-0", "w4")]


def test_lines_of_the_same_second_keep_replica_order(job_dir):
    write_log(job_dir, "master-0", [(T0, "m")])
    write_log(job_dir, "worker-0", [(T0, "w")])
    assert texts(read_logs(job_dir, ["worker-0", "master-0"], None, False)) == [("worker-0", "w"), ("master-0", "m")]


def test_each_line_carries_its_time_and_timestamps_prefix_it(job_dir):
    write_log(job_dir, "master-0", [(T0 + 0.25, "first"), (T0 + 5.5, "later")])
    lines = list(lines_of(read_logs(job_dir, ["master-0"], None, False)))
    assert [line.time for line in lines] == [pytest.approx(T0 + 0.25, abs=0.01), pytest.approx(T0 + 5.5, abs=0.01)]
    stamped = texts(read_logs(job_dir, ["master-0"], None, False, timestamps=True))
    assert stamped == [("master-0", "2023-11-14T22:13:20Z first"), ("master-0", "2023-11-14T22:13:25Z later")]


def test_lines_after_the_last_index_entry_get_the_file_time_and_an_unfinished_line_its_newline(job_dir):
    write_log(job_dir, "master-0", [(T0, "indexed")], tail="unindexed\nno newline")
    os.utime(job_dir.log_file("master-0"), (T0 + 9, T0 + 9))
    lines = list(lines_of(read_logs(job_dir, ["master-0"], None, False)))
    assert [(line.text, line.time) for line in lines] == [
        ("indexed", T0), ("unindexed", T0 + 9), ("no newline", T0 + 9)]


def test_a_line_cut_by_an_index_entry_belongs_to_the_span_in_which_it_ended(job_dir):
    job_dir.logs.mkdir(parents=True)
    job_dir.log_file("master-0").write_bytes(b"one\ntwo-is-long\nthree\n")
    job_dir.offsets_file("master-0").write_text(f"{T0} 6\n{T0 + 2} 16\n")  # the first entry falls inside "two"
    os.utime(job_dir.log_file("master-0"), (T0 + 3, T0 + 3))
    lines = list(lines_of(read_logs(job_dir, ["master-0"], None, False)))
    assert [(line.text, line.time) for line in lines] == [("one", T0), ("two-is-long", T0 + 2), ("three", T0 + 3)]


def test_tail_and_since_select_per_replica(job_dir):
    now = time.time()
    write_log(job_dir, "master-0", [(now - 100, "old"), (now - 50, "mid"), (now - 1, "new")])
    assert texts(read_logs(job_dir, ["master-0"], 2, False)) == [("master-0", "mid"), ("master-0", "new")]
    assert texts(read_logs(job_dir, ["master-0"], 0, False)) == []
    assert texts(read_logs(job_dir, ["master-0"], None, False, since_seconds=60)) == [
        ("master-0", "mid"), ("master-0", "new")]


def test_a_large_log_comes_in_several_chunks_of_whole_lines(job_dir, monkeypatch):
    monkeypatch.setattr("trainctl.backends.local.logs.CHUNK_BYTES", 64)
    write_log(job_dir, "master-0", [(T0, f"line {i}") for i in range(100)])
    chunks = list(read_logs(job_dir, ["master-0"], None, False))
    assert len(chunks) > 10 and all(chunk.data.endswith(b"\n") for chunk in chunks)
    assert [text for _, text in texts(chunks)] == [f"line {i}" for i in range(100)]


def test_replica_accepts_the_pod_name_status_shows():
    ids = ["master-0", "worker-0", "worker-1"]
    assert pick_replica("worker-1", "mnist", ids) == "worker-1"
    assert pick_replica("mnist-worker-1", "mnist", ids) == "worker-1"
    with pytest.raises(UserError, match="mnist-worker-0"):
        pick_replica("other-worker-1", "mnist", ids)


def test_the_writer_prefixes_every_line_aligned_and_never_interprets_user_text():
    out = io.BytesIO()
    writer = PrefixWriter(out, color=False)
    writer.write_all([LogChunk("master-0", b"[bold]not markup[/]\n\xff raw\n"), LogChunk("w-1", b"x\n")])
    assert out.getvalue() == b"master-0 | [bold]not markup[/]\nmaster-0 | \xff raw\nw-1      | x\n"
    assert writer.lines == 3


def test_the_writer_colors_prefixes_only_when_asked():
    out = io.BytesIO()
    PrefixWriter(out, color=True).write_all([LogChunk("master-0", b"a\n"), LogChunk("worker-0", b"b\n")])
    assert out.getvalue() == b"\x1b[36mmaster-0 |\x1b[0m a\n\x1b[35mworker-0 |\x1b[0m b\n"


def test_prefix_lines_keeps_empty_lines():
    assert prefix_lines(b"a\n\nb\n", b"p ") == b"p a\np \np b\n"


STAMPED = (b"2024-05-01T10:00:00.001000000Z a\n2024-05-01T10:00:00.001500000Z b\n"
           b"2024-05-01T10:00:00.002000000Z c\n2024-05-01T10:00:01.000000000Z d\n")


def test_kubernetes_lines_are_grouped_by_millisecond_and_their_stamps_removable():
    runs = list(split_by_stamp(STAMPED))
    assert [stamp for stamp, _ in runs] == [b"2024-05-01T10:00:00.001", b"2024-05-01T10:00:00.002",
                                            b"2024-05-01T10:00:01.000"]
    assert list(without_stamps(runs[0][1])) == [b"a", b"b"]


def test_kubernetes_pods_merge_by_their_timestamps():
    master = [LogChunk("master-0", b"m1\n", 1.0), LogChunk("master-0", b"m3\n", 3.0)]
    worker = [LogChunk("worker-0", b"w2\n", 2.0)]
    assert texts(merged([iter(master), iter(worker)])) == [("master-0", "m1"), ("worker-0", "w2"),
                                                           ("master-0", "m3")]


def test_a_stream_is_regrouped_into_whole_lines():
    assert list(whole_lines(iter([b"ab", b"c\nd", b"e\nf"]))) == [b"abc\n", b"de\n", b"f\n"]


@pytest.mark.parametrize("args, culprit", [(["-f", "--previous"], "--previous"), (["--tail", "-1"], "--tail")])
def test_contradictory_or_bad_flags_are_one_line_before_any_lookup(cli, args, culprit):
    result = cli("logs", "no-such-job", *args)
    assert result.returncode == 2 and culprit in result.stderr and len(result.stderr.splitlines()) == 1
