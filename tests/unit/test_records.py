"""The pure parts of the kept record (issue 26): one read of a log keeps its bounded tail, reports and result;
the ConfigMap format round-trips and refuses what is not this job's; readers pick the right run."""

from __future__ import annotations

import gzip
import json
import time

import pytest

from trainctl.backends.kube import records as fmt
from trainctl.controller.records import Captured, Due, due_runs, kept_run, merged
from trainctl.controller.tail import TailReader
from trainctl.core.job import Job

STAMP_WIDTH = 31
JOB = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
       "metadata": {"name": "mnist", "namespace": "ns", "uid": "job-uid"},
       "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
           {"name": "pytorch", "image": "python"}]}}}}}}


def stamp(second: int, nano: int = 0) -> bytes:
    return b"2026-01-02T03:%02d:%02d.%09dZ " % (second // 60 % 60, second % 60, nano)


def stamped(lines: list[bytes], start: int = 0) -> bytes:
    return b"".join(stamp(start + i // 1000, i % 1000) + line + b"\n" for i, line in enumerate(lines))


def read(data: bytes, limit: int, piece: int = 65536) -> TailReader:
    reader = TailReader(limit)
    for start in range(0, len(data), piece):
        reader.feed(data[start:start + piece])
    reader.finish()
    return reader


def test_fifty_mebibytes_keep_their_last_mebibyte_in_whole_lines_and_say_how_much_was_read():
    lines = [b"line %07d " % i + b"x" * 90 for i in range(500_000)]  # 50 MiB as written
    data = stamped(lines)
    reader = read(data, fmt.RUN_TAIL_BYTES)
    tail = reader.tail()
    assert reader.read == sum(len(line) + 1 for line in lines)
    kept = reader.kept(tail)
    assert fmt.RUN_TAIL_BYTES - 200 < kept <= fmt.RUN_TAIL_BYTES  # all the bound holds, in whole lines
    assert data.endswith(tail) and tail.startswith(b"2026-")
    assert len(reader.blocks) < 40  # what it holds while reading stays about the bound, not the log


def test_very_short_lines_keep_at_most_twice_the_bound_with_their_stamps():
    reader = read(stamped([b""] * 200_000), 1 << 20)
    tail = reader.tail()
    assert 2 * (1 << 20) - 32 <= len(tail) <= 2 * (1 << 20) and tail.endswith(b"Z \n")
    assert reader.kept(tail) < reader.read == 200_000


def test_a_line_that_never_ends_is_held_to_its_end_within_the_bound():
    data = stamp(0) + b"y" * (8 << 20)  # 8 MiB, no newline: a progress bar without \n, say
    reader = read(data, 1 << 20, piece=1 << 16)
    tail = reader.tail()
    assert reader.read == (8 << 20) + 1
    assert tail.startswith(stamp(0)) and tail.endswith(b"y\n")
    assert reader.kept(tail) <= (1 << 20) + 1


def test_reports_among_the_whole_log_are_kept_thinned_and_the_last_point_too():
    from trainctl.backends.reported import MAX_POINTS
    from trainctl.reporting import points_of

    report = [b'trainctl-progress:v1 [[%d.0, %d, 30000, {"loss": 0.5}]]' % (1_700_000_000 + i, i) for i in range(30_000)]
    data = stamped(report + [b'trainctl-progress:v1 [[1800000000.0, 30001, 30001, {}]]'] + [b"z" * 100] * 20_000)
    reader = read(data, 64 << 10)
    points = [p for line in reader.report_lines() for p in points_of(line.decode())]
    assert len(points) == MAX_POINTS + 1 and points[0][1] == 0 and points[-2][1] == 29_999
    assert points[-1][1:3] == (30001, 30001)  # the latest step, though it had no metrics


def test_a_result_line_the_tail_lost_is_kept_apart():
    result = b'trainctl-result:v2 {"$tuple": [1, 2]}'
    reader = read(stamped([b"before", result] + [b"after" * 40] * 2000), 8 << 10)
    tail = reader.tail()
    assert result not in tail and reader.result_line(tail).endswith(result + b"\n")
    short = read(stamped([b"before", result]), 8 << 10)
    assert short.result_line(short.tail()) is None  # in the tail already


def captured(key: str = "pod-uid", restart: int = 0, lines: int = 10, code: int = 0) -> Captured:
    tail = stamped([b"run %s line %d" % (key.encode(), i) for i in range(lines)])
    run = fmt.KeptRun(pod="mnist-master-0", pod_uid=key, restart=restart, exit_code=code, reason="Completed",
                      finished="2026-01-02T03:04:05Z", read=len(tail), kept=fmt.content_bytes(tail))
    return Captured(run, fmt.packed(tail), [b'trainctl-progress:v1 [[1.5, 1, 2, {"loss": 1.0}]]\n'], None, 12.0)


def config_map(record: fmt.Record) -> dict:
    body = fmt.body(record, JOB, "mnist-master-0")
    return {**body, "metadata": {**body["metadata"], "resourceVersion": "7"}}


def test_a_record_round_trips_through_its_config_map():
    record = merged(None, [captured("a", 0), captured("a", 1, code=3)], "master-0")
    body = config_map(record)
    assert body["metadata"]["name"] == "mnist-master-0.trainctl-record"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    back = fmt.decoded(json.loads(json.dumps(body)), "job-uid", "master-0")
    assert back.runs == record.runs and [r.restart for r in back.runs] == [1, 0]  # newest first
    assert back.run_log(0) == gzip.decompress(record.logs[0]) and back.resource_version == "7"
    assert back.report_lines() and fmt.listed_runs(body["metadata"]) == ("master-0", "job-uid", back.keys)


def test_only_this_jobs_record_is_read():
    body = config_map(merged(None, [captured()], "master-0"))
    assert fmt.decoded(body, "another-uid", "master-0") is None  # an earlier job of the same name, or planted
    assert fmt.decoded(body, "job-uid", "worker-0") is None
    unlabelled = {**body, "metadata": {**body["metadata"], "labels": {}}}
    assert fmt.decoded(unlabelled, "job-uid", "master-0") is None
    bomb = {**body, "binaryData": {"run-0.log.gz": __import__("base64").b64encode(
        gzip.compress(b"\0" * (4 * fmt.RUN_TAIL_BYTES))).decode()}}
    assert fmt.decoded(bomb, "job-uid", "master-0") is None  # unpacks past its bound: not read at all


def test_a_third_run_pushes_out_the_first_and_reports_accumulate():
    first = merged(None, [captured("a", 0)], "master-0")
    second = merged(first, [captured("b", 0)], "master-0")
    third = merged(second, [captured("c", 0)], "master-0")
    assert [run.pod_uid for run in third.runs] == ["c", "b"]
    assert len(third.report_lines()) >= 1


def test_a_record_is_fitted_to_its_share_cut_from_its_oldest_lines_and_says_so():
    noisy = [bytes(__import__("random").Random(i).randbytes(20).hex(), "ascii") for i in range(20_000)]
    tail = stamped(noisy)
    run = fmt.KeptRun(pod="p", pod_uid="u", restart=0, read=len(tail), kept=fmt.content_bytes(tail))
    record = fmt.Record("master-0", (run,), (fmt.packed(tail),))
    budget = fmt.record_budget(512)  # a 512-replica job's share: 16 KiB
    fitted = fmt.fitted(record, budget)
    assert fmt.stored_size(fitted) <= budget
    kept = fitted.run_log(0)
    assert tail.endswith(kept) and fitted.runs[0].cut and "cut to the job's share" in fitted.runs[0].lost
    assert "last" in fmt.note(fitted.runs[0], pod_gone=True)


def test_the_job_total_bounds_every_replicas_share():
    for replicas in (1, 2, 8, 64, 500):
        assert fmt.record_budget(replicas) * replicas <= max(fmt.JOB_RECORD_BYTES, replicas * fmt.MIN_RECORD_BYTES)
        assert fmt.record_budget(replicas) <= fmt.CONFIGMAP_BYTES - fmt.RESERVED_BYTES


def pod(uid: str = "pod-uid", restarts: int = 0, state: dict | None = None, last: dict | None = None,
        deleting: bool = False) -> dict:
    status = {"name": "pytorch", "restartCount": restarts, "state": state or {"running": {"startedAt": "x"}}}
    if last:
        status["lastState"] = last
    metadata = {"name": "mnist-master-0", "namespace": "ns", "uid": uid}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-02T03:04:05Z"
    return {"metadata": metadata, "spec": {"containers": [{"name": "pytorch"}]},
            "status": {"phase": "Running", "containerStatuses": [status]}}


ENDED = {"terminated": {"exitCode": 1, "reason": "Error", "message": "raised", "startedAt": "2026-01-02T03:00:00Z",
                        "finishedAt": "2026-01-02T03:04:05Z"}}


def test_the_ended_runs_of_a_pod_are_its_last_state_and_its_terminated_state():
    job = Job(JOB)
    assert due_runs(job, pod()) == []
    assert [d.key for d in due_runs(job, pod(deleting=True), stopping=True)] == ["pod-uid/0"]
    dues = due_runs(job, pod(restarts=2, state=ENDED, last=ENDED))
    assert [(d.key, d.previous) for d in dues] == [("pod-uid/1", True), ("pod-uid/2", False)]
    run = kept_run(dues[0], pod(restarts=2, state=ENDED, last=ENDED), None, b"", "gone")
    assert (run.exit_code, run.reason, run.message, run.lost) == (1, "Error", "raised", "gone")
    stale = kept_run(Due("mnist-master-0", "pod-uid", 0, "pytorch"), pod(restarts=2, state=ENDED), None, b"", "")
    assert stale.exit_code is None  # kubelet no longer says how restart 0 ended


def test_readers_pick_the_last_run_or_the_one_before():
    record = merged(None, [captured("old", 0), captured("new", 0)], "master-0")
    assert fmt.shown(record, None, "pytorch", previous=False).index == 0
    assert fmt.shown(record, None, "pytorch", previous=True).index == 1
    recreated = pod(uid="newest")
    shown = fmt.shown(record, recreated, "pytorch", previous=True)  # kubelet has no previous: a deleted pod's run
    assert shown.index == 0 and shown.pod_gone
    assert fmt.shown(record, pod(uid="new"), "pytorch", previous=False).index == 0  # the pod's run, log unreadable


def test_a_kept_run_reads_as_a_log_with_a_line_saying_so():
    record = merged(None, [captured("a", 0, lines=50)], "master-0")
    chunks = list(fmt.kept_chunks(fmt.Shown(record, 0), "master-0", tail=5, since_seconds=None, keep_stamps=False))
    text = b"".join(chunk.data for chunk in chunks).decode()
    assert text.startswith("(kept record: pod mnist-master-0 removed; run 0 ended 2026-01-02T03:04:05Z, exit code 0")
    assert text.splitlines()[1:] == [f"run a line {i}" for i in range(45, 50)]
    assert chunks[1].time > 0
    recent = list(fmt.kept_chunks(fmt.Shown(record, 0), "master-0", tail=None, since_seconds=int(time.time()),
                                  keep_stamps=True))
    assert len(recent) >= 2


@pytest.mark.parametrize("run, words", [
    (fmt.KeptRun("p", "u", 0, exit_code=0, read=10, kept=10), "whole log"),
    (fmt.KeptRun("p", "u", 0, read=0, kept=0, lost="its pod was removed before its log could be read"),
     "its log was not kept: its pod was removed"),
    (fmt.KeptRun("p", "u", 2, exit_code=143, reason="Error", read=50 << 20, kept=1 << 20, deleted=True),
     "last 1.0 MiB of 50.0 MiB"),
])
def test_the_note_says_what_was_kept(run, words):
    assert words in fmt.note(run, pod_gone=True)
