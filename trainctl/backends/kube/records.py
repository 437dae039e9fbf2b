"""The kept record of a replica's ended runs on a cluster: its format, its bounds, and reading it back.

A pod's log lives as long as the pod. trainctl's controller (trainctl/controller/records.py) keeps, for
every replica, one ConfigMap owned by the job (so the garbage collector removes it with the job, and TTL
with it) named ``<pod name>.trainctl-record`` and labelled ``training.kubeflow.org/job-name`` and
:data:`RECORD_LABEL`. It holds the replica's last :data:`MAX_RUNS` ended runs, newest first:

* in the annotation :data:`RECORD_ANNOTATION`, JSON: per run the pod, its uid and restart number (which
  identify the run), exit code, reason, signal, termination message, start and end, how many bytes of log
  were read and how many kept, and why less (or none) was kept; small, so a metadata-only list of a job's
  records gives ``status`` its rows without moving any log;
* in ``binaryData``, gzip: each run's log tail (:data:`LOG_KEYS`: the last :data:`RUN_TAIL_BYTES` as the
  program wrote them, each line behind kubelet's time stamp, so replicas merge in time order), the
  replica's progress reports (:data:`REPORTS_KEY`, thinned like ``job.metrics()``) and a function's result
  line when its run's tail could not hold it (:data:`RESULT_KEY`).

Bounds: a ConfigMap holds at most 1 MiB; a job's records together hold at most :data:`JOB_RECORD_BYTES`
(compressed), so the share of each shrinks as replicas grow (:func:`record_budget`). :func:`fitted`
cuts what does not fit, oldest first, and the run says so (``kept`` < ``read``, or ``lost``).

A record is data from the cluster, never trusted as code: :func:`decoded` checks every field's type and
size, bounds every decompression, and returns None for anything that is not this job's record (a label or
a controlling ownerReference of another uid: a stale record of an earlier job of the same name, or one
planted by someone who may write ConfigMaps in the namespace). docs/records.md has the threat model.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import zlib
from collections.abc import Iterator
from typing import NamedTuple
from datetime import datetime, timezone

from trainctl.backends.base import LogChunk

RECORD_LABEL = "trainctl.io/record"
RECORD_ANNOTATION = "trainctl.io/record"
FORMAT = "v1"
NAME_SUFFIX = ".trainctl-record"
MAX_RUNS = 2  # the last run and the one before it (``--previous``)
KiB, MiB = 1 << 10, 1 << 20
RUN_TAIL_BYTES = 1 * MiB  # of each run's log, the last this many bytes as written (and at most twice that stamped)
CONFIGMAP_BYTES = 1 * MiB  # the API server's limit on a ConfigMap's data
RESERVED_BYTES = 32 * KiB  # of a ConfigMap, for its metadata (the runs' annotation, labels, owner)
JOB_RECORD_BYTES = 8 * MiB  # compressed, a job's records together
MIN_RECORD_BYTES = 16 * KiB  # a replica's share never shrinks below this (past 512 replicas the job total grows)
MESSAGE_CHARS = 4096  # of a termination message (kubelet's own bound)
TEXT_CHARS = 256  # of any other text field
MAX_ANNOTATION_CHARS = 64 * KiB
#: the most a stored log, report or result unpacks to: a compressed bomb costs a reader no more than this
MAX_UNPACKED = {"log": 2 * RUN_TAIL_BYTES + 64, "reports": 16 * MiB, "result": 2 * MiB}
LOG_KEYS = ("run-0.log.gz", "run-1.log.gz")
REPORTS_KEY = "reports.gz"
RESULT_KEY = "result.gz"
STAMP_PREFIX = len("2006-01-02T15:04:05")
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"  # of kubelet's time stamp, what ``--since`` compares to the second


class BadRecord(ValueError):
    """A ConfigMap that says it is a record and is not one: garbled, cut, or forged."""


# NamedTuples, as trainctl/backends/base.py's records are: ``status`` of a job whose pods are gone reads these,
# and making dataclasses would load inspect and ast for it
class KeptRun(NamedTuple):
    """One ended run of a replica's main container, as the record keeps it."""

    pod: str
    pod_uid: str
    restart: int  # the container's restartCount during this run
    exit_code: int | None = None
    reason: str = ""
    signal: int | None = None
    message: str = ""  # the termination message (the function runner's record of a raise)
    started: str | None = None  # RFC 3339
    finished: str | None = None
    read: int = 0  # bytes of its log read (as written, kubelet's time stamps aside)
    kept: int = 0  # of them, the last this many are kept
    lost: str = ""  # why less than the tail, or no log at all, was kept
    deleted: bool = False  # its pod was being deleted when it ended (by hand, an eviction, suspend, cleanup)

    @property
    def key(self) -> str:
        """What identifies the run: its pod's uid and the container's restart number."""
        return run_key(self.pod_uid, self.restart)

    @property
    def cut(self) -> bool:
        return self.kept < self.read

    def as_data(self) -> dict:
        return {"pod": self.pod, "podUID": self.pod_uid, "restart": self.restart, "exitCode": self.exit_code,
                "reason": self.reason, "signal": self.signal, "message": self.message, "startedAt": self.started,
                "finishedAt": self.finished, "read": self.read, "kept": self.kept, "lost": self.lost,
                "deleted": self.deleted}


class Record(NamedTuple):
    """What a replica's record holds: runs newest first, and beside each its compressed log tail (or None)."""

    replica: str
    runs: tuple[KeptRun, ...] = ()
    logs: tuple[bytes | None, ...] = ()  # gzip of kubelet-stamped whole lines, one per run
    reports: bytes | None = None  # gzip of progress report lines (trainctl.reporting), oldest first
    result: bytes | None = None  # gzip of the newest run's result line, when its tail lost it
    last_output: float | None = None  # Unix seconds of the newest run's last line
    resource_version: str = ""  # of the ConfigMap read, for a conditional update

    def run_log(self, index: int) -> bytes | None:
        """The stamped lines of run ``index`` (None when none were kept)."""
        data = self.logs[index] if index < len(self.logs) else None
        return None if data is None else unpacked(data, "log")

    def report_lines(self) -> list[str]:
        data = unpacked(self.reports, "reports") if self.reports else b""
        return [line for line in data.decode(errors="replace").split("\n") if line]

    def result_line(self) -> bytes | None:
        return unpacked(self.result, "result") if self.result else None

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(run.key for run in self.runs)


def run_key(pod_uid: str, restart: int) -> str:
    return f"{pod_uid}/{restart}"


def record_name(pod_name: str) -> str:
    """The record's ConfigMap name: the pod's, marked (at most 63 + 16 characters: a valid name)."""
    return pod_name + NAME_SUFFIX


def selector(job_name: str) -> str:
    from trainctl.frameworks.base import LABEL_JOB_NAME

    return f"{LABEL_JOB_NAME}={job_name},{RECORD_LABEL}={FORMAT}"


def record_budget(total_replicas: int) -> int:
    """A replica's share of its job's :data:`JOB_RECORD_BYTES`, within a ConfigMap's room."""
    return max(MIN_RECORD_BYTES, min(CONFIGMAP_BYTES - RESERVED_BYTES, JOB_RECORD_BYTES // max(1, total_replicas)))


# ---- writing ----------------------------------------------------------------------------------------------

def packed(data: bytes) -> bytes:
    import gzip  # the controller's, when it writes: readers unpack with zlib alone

    return gzip.compress(data, compresslevel=6, mtime=0)


def body(record: Record, job: dict, pod_name: str) -> dict:
    """The ConfigMap that holds ``record``, owned by ``job`` (the resource as the API server holds it)."""
    from trainctl import API_GROUP
    from trainctl.frameworks.base import LABEL_JOB_NAME

    metadata = job["metadata"]
    owner = {"apiVersion": job.get("apiVersion") or f"{API_GROUP}/v1", "kind": job["kind"], "name": metadata["name"], "uid": metadata["uid"],
             "controller": True, "blockOwnerDeletion": True}
    binary = {key: data for key, data in zip(LOG_KEYS, record.logs) if data is not None}
    binary.update({key: data for key, data in ((REPORTS_KEY, record.reports), (RESULT_KEY, record.result)) if data})
    annotation = {"replica": record.replica, "runs": [run.as_data() for run in record.runs],
                  "lastOutput": record.last_output}
    meta = {"name": record_name(pod_name), "namespace": metadata.get("namespace", ""),
            "labels": {LABEL_JOB_NAME: metadata["name"], RECORD_LABEL: FORMAT},
            "annotations": {RECORD_ANNOTATION: json.dumps(annotation, separators=(",", ":"))},
            "ownerReferences": [owner]}
    if record.resource_version:
        meta["resourceVersion"] = record.resource_version
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "binaryData": {key: base64.b64encode(data).decode() for key, data in binary.items()}}


def stored_size(record: Record) -> int:
    return sum(len(data) for data in (*record.logs, record.reports, record.result) if data)


def fitted(record: Record, budget: int) -> Record:
    """``record`` within ``budget`` compressed bytes: reports and result at most a quarter each, then the newest
    run's tail, then the older run's in what is left; each cut from its start (its oldest lines), and said."""
    reports = record.reports if record.reports and len(record.reports) <= budget // 4 else thinner(record, budget // 4)
    result = record.result if record.result and len(record.result) <= budget // 4 else None
    runs, logs = list(record.runs), list(record.logs)
    if record.result and result is None:
        runs[0] = runs[0]._replace(lost=joined(runs[0].lost, "its result line was too large to keep"))
    room = budget - len(reports or b"") - len(result or b"")
    for index, data in enumerate(logs):
        if data is None:
            continue
        if len(data) > room:
            runs[index], logs[index] = cut_to(runs[index], data, room)
        room -= len(logs[index] or b"")
    return record._replace(runs=tuple(runs), logs=tuple(logs), reports=reports, result=result)


def thinner(record: Record, room: int) -> bytes | None:
    """The record's report lines, halved until they fit ``room`` compressed (the last point always kept)."""
    lines = record.report_lines()
    while lines:
        data = packed(("\n".join(lines) + "\n").encode())
        if len(data) <= room:
            return data
        lines = lines[::2] if len(lines) > 1 else []
    return None


def cut_to(run: KeptRun, data: bytes, room: int) -> tuple[KeptRun, bytes | None]:
    """The run's tail cut from its oldest lines until it packs into ``room`` bytes (None: not even a line fits)."""
    text, size = unpacked(data, "log"), len(data)
    while room > 64 and text:
        keep = int(len(text) * room / size * 0.9)  # packed size is about proportional; a bit less, to be done soon
        newline = text.find(b"\n", len(text) - keep - 1)
        text = text[newline + 1:] if newline >= 0 else b""
        data = packed(text)
        size = len(data)
        if text and size <= room:
            return run._replace(kept=content_bytes(text), lost=joined(run.lost, "cut to the job's share")), data
    return run._replace(kept=0, lost=joined(run.lost, "no room left in the job's share for this run's log")), None


def joined(first: str, second: str) -> str:
    return f"{first}; {second}" if first else second


def content_bytes(stamped: bytes) -> int:
    """The bytes of stamped whole lines as the program wrote them (kubelet's stamps and their spaces aside)."""
    if not stamped:
        return 0
    width = stamped.find(b" ") + 1
    return len(stamped) - width * stamped.count(b"\n")


# ---- reading ----------------------------------------------------------------------------------------------

def unpacked(data: bytes, what: str) -> bytes:
    """gzip data unpacked, at most :data:`MAX_UNPACKED` of ``what``; BadRecord for anything else."""
    limit = MAX_UNPACKED[what]
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(data, limit)
    except zlib.error as error:
        raise BadRecord(f"its {what} does not unpack: {error}") from None
    if inflater.unconsumed_tail or not inflater.eof:
        raise BadRecord(f"its {what} unpacks to more than {limit} bytes, or is cut")
    return out


def decoded(config_map: object, job_uid: str, replica: str) -> Record | None:
    """The record in ``config_map`` when it is the record of replica ``replica`` of the job with uid ``job_uid``;
    None for anything else (another job's, garbled, forged). Never raises for what the ConfigMap holds."""
    try:
        return checked(config_map, job_uid, replica)
    except (BadRecord, KeyError, TypeError, ValueError, AttributeError, RecursionError, binascii.Error):
        return None


def checked(config_map: object, job_uid: str, replica: str) -> Record | None:
    metadata = expect(config_map, dict)["metadata"]
    owner, data = owner_and_data(metadata)
    if owner != job_uid or data.get("replica") != replica:
        return None
    runs = runs_of(data)
    binary = expect(config_map.get("binaryData") or {}, dict)
    blobs = {key: base64.b64decode(bounded_text(value, 2 * CONFIGMAP_BYTES), validate=True)
             for key, value in binary.items() if key in (*LOG_KEYS, REPORTS_KEY, RESULT_KEY)}
    for key, blob in blobs.items():  # each unpacks within its bound, or the record is not read at all
        unpacked(blob, "log" if key in LOG_KEYS else key.split(".")[0])
    last = data.get("lastOutput")
    return Record(replica=replica, runs=runs, logs=tuple(blobs.get(key) for key in LOG_KEYS[:len(runs)]),
                  reports=blobs.get(REPORTS_KEY), result=blobs.get(RESULT_KEY),
                  last_output=float(last) if type(last) in (int, float) and 0 < last < 1e11 else None,
                  resource_version=bounded_text(str(metadata.get("resourceVersion") or ""), TEXT_CHARS))


def listed_runs(metadata: object) -> tuple[str, str, frozenset[str]] | None:
    """(replica, owner uid, run keys) of a record from its metadata alone (a metadata-only list); None for
    anything that is not a record."""
    try:
        owner, data = owner_and_data(metadata)
        return bounded_text(data.get("replica"), TEXT_CHARS), owner, frozenset(run.key for run in runs_of(data))
    except (BadRecord, KeyError, TypeError, ValueError, AttributeError, RecursionError):
        return None


def owner_and_data(metadata: object) -> tuple[str, dict]:
    """The uid of the record's controlling owner and its annotation's data; BadRecord for what is not a record."""
    labels = expect(expect(metadata, dict).get("labels") or {}, dict)
    owners = [ref for ref in expect(metadata.get("ownerReferences") or [], list)
              if type(ref) is dict and ref.get("controller") is True]
    if labels.get(RECORD_LABEL) != FORMAT or len(owners) != 1:
        raise BadRecord("not labelled a record, or not controlled by one owner")
    data = json.loads(bounded_text(expect(metadata.get("annotations"), dict)[RECORD_ANNOTATION],
                                   MAX_ANNOTATION_CHARS))
    return bounded_text(owners[0].get("uid"), TEXT_CHARS), expect(data, dict)


def runs_of(data: dict) -> tuple[KeptRun, ...]:
    return tuple(kept_run(item) for item in expect(data.get("runs"), list)[:MAX_RUNS])


def kept_run(data: object) -> KeptRun:
    item = expect(data, dict)
    return KeptRun(pod=bounded_text(item["pod"], TEXT_CHARS), pod_uid=bounded_text(item["podUID"], TEXT_CHARS),
                   restart=count(item["restart"]), exit_code=number_or_none(item.get("exitCode")),
                   reason=bounded_text(item.get("reason") or "", TEXT_CHARS),
                   signal=number_or_none(item.get("signal")),
                   message=bounded_text(item.get("message") or "", MESSAGE_CHARS),
                   started=time_or_none(item.get("startedAt")), finished=time_or_none(item.get("finishedAt")),
                   read=count(item.get("read", 0)), kept=count(item.get("kept", 0)),
                   lost=bounded_text(item.get("lost") or "", 4 * TEXT_CHARS), deleted=item.get("deleted") is True)


def expect(value: object, kind: type):
    if type(value) is not kind:
        raise BadRecord(f"a {type(value).__name__} where a {kind.__name__} belongs")
    return value


def bounded_text(value: object, limit: int) -> str:
    if type(value) is not str or len(value) > limit:
        raise BadRecord("a text field that is not a string, or too long")
    return value


def count(value: object) -> int:
    if type(value) is not int or not 0 <= value < 1 << 53:
        raise BadRecord("a count that is not a non-negative integer")
    return value


def number_or_none(value: object) -> int | None:
    if value is None:
        return None
    if type(value) is not int or abs(value) >= 1 << 53:
        raise BadRecord("an exit code or signal that is not an integer")
    return value


def time_or_none(value: object) -> str | None:
    if value is None:
        return None
    text = bounded_text(value, 40)
    datetime.fromisoformat(text.replace("Z", "+00:00"))  # ValueError for anything else
    return text


# ---- a kept run as log lines ------------------------------------------------------------------------------

class Shown(NamedTuple):
    """Which of a record's runs a reader shows, and why it is the record's and not the pod's."""

    record: Record
    index: int
    pod_gone: bool = True


def note(run: KeptRun, pod_gone: bool) -> str:
    """``(kept record: pod mnist-worker-0 removed; run 0 ended 2026-01-02T03:04:05Z, exit code 1 (Error);
    last 1.0 MiB of 50.0 MiB)``: the line before a kept run's lines."""
    where = f"pod {run.pod} removed" if pod_gone else f"an earlier run of pod {run.pod}"
    ended = f"run {run.restart} ended {run.finished or 'at an unknown time'}"
    if run.exit_code is not None:
        ended += f", exit code {run.exit_code}" + (f" ({run.reason})" if run.reason else "")
    if run.deleted:
        ended += ", as its pod was deleted"
    if run.kept == 0 and (run.lost or not run.read):
        size = f"its log was not kept: {run.lost}" if run.lost else "it printed nothing"
    elif run.cut:
        size = f"last {human(run.kept)} of {human(run.read)}" + (f": {run.lost}" if run.lost else "")
    else:
        size = f"whole log, {human(run.kept)}"
    return f"(kept record: {where}; {ended}; {size})"


def human(size: int) -> str:
    """``1.0 MiB`` (from 1000 KiB up, so that the bound reads as itself), ``12.5 KiB``, ``800 B``."""
    if size >= 1000 * KiB:
        return f"{size / MiB:.1f} MiB"
    return f"{size / KiB:.1f} KiB" if size >= 1000 else f"{size} B"


def kept_chunks(shown: Shown, replica: str, *, tail: int | None, since_seconds: int | None,
                keep_stamps: bool) -> Iterator[LogChunk]:
    """A kept run as a pod's log would read: a line saying where it comes from, then its lines (the last ``tail``
    of them, those of the last ``since_seconds``), and a result line its tail lost at the end."""
    from trainctl.backends.kube.logs import stamped_blocks_to_chunks

    record, index = shown.record, shown.index
    run = record.runs[index]
    stamped = record.run_log(index) or b""
    if index == 0 and (result := record.result_line()):
        stamped += result if result.endswith(b"\n") else result + b"\n"
    stamped = recent(stamped, since_seconds, tail)
    yield LogChunk(replica, (note(run, shown.pod_gone) + "\n").encode(), 0.0)  # before its lines, as the pods'
    if stamped:
        yield from stamped_blocks_to_chunks([stamped], replica, keep_stamps)


def recent(stamped: bytes, since_seconds: int | None, tail: int | None) -> bytes:
    """Of stamped whole lines, those of the last ``since_seconds`` and of them the last ``tail``."""
    if since_seconds is not None and stamped:
        cutoff = datetime.fromtimestamp(datetime.now(timezone.utc).timestamp() - since_seconds, timezone.utc)
        stamp = cutoff.strftime("%Y-%m-%dT%H:%M:%S").encode()
        lines = stamped[:-1].split(b"\n")
        first = bisect.bisect_left(lines, stamp, key=lambda line: line[:STAMP_PREFIX])
        stamped = b"".join(line + b"\n" for line in lines[first:])
    if tail is not None:
        if tail == 0:
            return b""
        lines = stamped.split(b"\n")[:-1]
        stamped = b"".join(line + b"\n" for line in lines[-tail:])
    return stamped


# ---- what readers ask of the cluster ------------------------------------------------------------------

def read(client, namespace: str, pod_name: str, job_uid: str, replica: str) -> Record | None:
    """The replica's record, when there is one of this job (None otherwise, or when it may not be read)."""
    from trainctl.kube.client import CONFIGMAPS, ApiError

    try:
        found = client.get(CONFIGMAPS, record_name(pod_name), namespace)
    except (ApiError, OSError):  # none (404), or not ours to read (403): as if none were kept
        return None
    return decoded(found, job_uid, replica)


def list_metadata(client, namespace: str | None, label_selector: str) -> list[dict]:
    """The metadata of the records that ``label_selector`` picks, without their logs (ApiError, OSError)."""
    from trainctl.kube.client import CONFIGMAPS

    return client.request("GET", CONFIGMAPS.path(namespace), query={"labelSelector": label_selector}, verb="list",
                          accept=METADATA_LIST).get("items") or []


def listed(client, namespace: str, job_name: str, job_uid: str) -> dict[str, tuple[KeptRun, ...]]:
    """Of each of the job's records, by replica, the runs it keeps: one metadata-only list, no log moved."""
    from trainctl.kube.client import ApiError

    try:
        items = list_metadata(client, namespace, selector(job_name))
    except (ApiError, OSError):
        return {}
    found = {}
    for item in items:
        try:
            owner, data = owner_and_data(item.get("metadata"))
            if owner == job_uid:
                found[bounded_text(data.get("replica"), TEXT_CHARS)] = runs_of(data)
        except (BadRecord, KeyError, TypeError, ValueError, AttributeError, RecursionError):
            continue  # not a record of this job, or damaged: as if none were kept
    return found


def release(client, namespace: str, job_name: str) -> None:
    """Delete the job's records (``trainctl delete``: as with pods, no garbage collector needed)."""
    from trainctl.kube.client import CONFIGMAPS, ApiError

    try:
        items = list_metadata(client, namespace, selector(job_name))
    except ApiError:  # may not list them: the garbage collector removes them with the job
        return
    for item in items:
        try:
            client.delete(CONFIGMAPS, item["metadata"]["name"], namespace, uid=item["metadata"].get("uid"))
        except ApiError as error:
            if error.status not in (404, 409, 403):
                raise


def shown(record: Record | None, pod: dict | None, container: str, previous: bool) -> Shown | None:
    """Which kept run stands for the replica's log: with its pod gone, the last run (``previous``: the one
    before); with its pod there but its log unreadable, that run of the pod, or (``previous``) the newest kept run
    before the pod's current one (a deleted pod's, or one kubelet no longer has)."""
    if record is None or not record.runs:
        return None
    if pod is None:
        index = 1 if previous else 0
        return Shown(record, index) if index < len(record.runs) else None
    uid = (pod.get("metadata") or {}).get("uid", "")
    status = next((s for s in (pod.get("status") or {}).get("containerStatuses") or [] if s.get("name") == container),
                  {})
    current = run_key(uid, status.get("restartCount") or 0)
    for index, run in enumerate(record.runs):
        if (run.key == current) != previous:
            return Shown(record, index, pod_gone=run.pod_uid != uid)
    return None


def kept_row(name: str, rtype: str, index: int, runs: tuple[KeptRun, ...], job_finished: bool):
    """A removed pod's replica row (``status``) from its kept runs: the last one, and the one before it."""
    from trainctl.backends.base import ReplicaRow

    last, before = runs[0], runs[1] if len(runs) > 1 else None
    state = "Deleted" if last.deleted else "Unknown" if last.exit_code is None else \
        "Succeeded" if last.exit_code == 0 else "Failed"
    return ReplicaRow(name=name, replica_type=rtype, index=index, state=state, restarts=last.restart,
                      exit_code=last.exit_code, reason=last.reason, started=last.started, finished=last.finished,
                      last_exit_code=before.exit_code if before else None, last_reason=before.reason if before else "",
                      last_finished=before.finished if before else None, message=last.message,
                      last_message=before.message if before else "", stopped=last.deleted and job_finished,
                      kept="pod removed; from the kept record")
