"""``trainctl export NAME -o DIR`` and ``job.export(DIR)``: a job's whole record as plain files, on either backend.

    DIR/job.yaml                       the resource with its status (what ``status -o yaml`` prints)
    DIR/events.yaml                    its recent events
    DIR/logs/<replica>.log             each replica's output as it wrote it (no prefixes): its pod's log, or,
                                       its pod gone, the run trainctl's controller kept (after a line saying so)
    DIR/logs/<replica>.previous.log    the run before, where there is one
    DIR/metrics/<replica>.jsonl        every point it reported with metrics: {"time", "step", "total", "metrics"}
    DIR/result.json                    a function job's return value, as the tagged JSON its result line holds
                                       (``result.pickle.b64`` for a job run with pickle_result: never unpickled)
    DIR/failure.txt                    why it failed (the failure summary), when it failed

Written into a fresh directory beside DIR and renamed into place when complete, so DIR appears whole or not
at all; an existing DIR must be empty. Nothing read is run or unpickled: logs and results are copied as bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from trainctl.errors import UserError, spelled

RESULT_PREFIXES = {"trainctl-result:v2 ": "result.json", "trainctl-result:pickle ": "result.pickle.b64"}


def export(client, name: str, namespace: str, directory: str | os.PathLike) -> Path:
    """Write the job's record into ``directory`` (see the module docstring); returns its path. ``client``: the
    trainctl.sdk.client.Client that reaches the job."""
    target = checked_target(directory)
    details = client.get(name, namespace)  # NotFound before anything is written
    try:
        draft = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".export", dir=target.parent))
    except OSError as error:
        raise UserError(f"{where()} {str(target)!r}: cannot write in {target.parent} ({error.strerror or error}): "
                        "pick a directory you may write") from None
    try:
        write_all(client, details, draft)
        draft.chmod(0o755)  # mkdtemp's 0700 is for the draft only
        os.rename(draft, target)  # an empty target is replaced; anything else there makes this fail
    except OSError as error:
        shutil.rmtree(draft, ignore_errors=True)
        raise UserError(f"{where()} {str(target)!r}: writing failed ({error.strerror or error}); nothing was "
                        "written") from None
    except BaseException:
        shutil.rmtree(draft, ignore_errors=True)
        raise
    return target


def where() -> str:
    """The argument as the caller gave it."""
    return spelled("-o/--output", "directory")


def checked_target(directory: str | os.PathLike) -> Path:
    """The directory to create: absent, or empty; its parent existing."""
    if not isinstance(directory, (str, os.PathLike)) or not str(directory):
        raise UserError(f"{where()} {directory!r}: give the path of a directory to create")
    target = Path(directory).expanduser().absolute()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UserError(f"{where()} {str(directory)!r} exists and is not an empty directory: pick a new one, "
                        "or empty it first")
    if not target.parent.is_dir():
        raise UserError(f"{where()} {str(directory)!r}: its parent directory {target.parent} does not exist: "
                        "create it first")
    return target


def write_all(client, details, draft: Path) -> None:
    import yaml

    resource = details.resource
    metadata = resource["metadata"]
    name, namespace = metadata["name"], metadata.get("namespace")
    (draft / "job.yaml").write_text(yaml.safe_dump(resource, sort_keys=False, default_flow_style=False))
    (draft / "events.yaml").write_text(yaml.safe_dump(details.events, sort_keys=False, default_flow_style=False))
    result = write_logs(client, resource, draft / "logs")
    if result is not None:
        (draft / RESULT_PREFIXES[result[0]]).write_bytes(result[1])
    write_metrics(client, name, namespace, draft / "metrics")
    summary = client.failure_summary(name, namespace, details=details)
    if summary is not None:
        (draft / "failure.txt").write_text(str(summary) + "\n")


def write_logs(client, resource: dict, logs: Path) -> tuple[str, bytes] | None:
    """Each replica's log and previous log as files, written a chunk at a time (a log may be far larger than
    memory); the last result line any current log holds, as (its prefix, what follows it)."""
    from trainctl.core.job import Job

    logs.mkdir()
    job = Job(resource)
    name, namespace = job.name, job.namespace
    result = None
    for replica in (job.replica_id(t, i) for t in job.replica_types for i in range(job.replicas(t))):
        for previous in (False, True):
            path = logs / f"{replica}{'.previous' if previous else ''}.log"
            chunks = client.log_chunks(name, namespace, replica=replica, previous=previous)
            found, only_no_logs = copied(chunks, path)
            if previous and only_no_logs:
                path.unlink()
            elif not previous:
                result = found or result
    return result


def copied(chunks, path: Path) -> tuple[tuple[str, bytes] | None, bool]:
    """Write the log ``chunks`` to ``path``; the last result line among them, and whether they said nothing but
    that there is no such log (or nothing at all)."""
    found, first, count = None, b"", 0
    with open(path, "wb") as out:
        for chunk in chunks:
            out.write(chunk.data)
            found = last_result(chunk.data) or found
            first, count = first if count else chunk.data, count + 1
    return found, count == 0 or (count == 1 and (not first or is_only_no_logs(first)))


def is_only_no_logs(data: bytes) -> bool:
    """The log reader's one line saying there is no such log (trainctl.backends.kube.logs.no_logs)."""
    return data.startswith(b"(no logs: ") and data.count(b"\n") == 1


def last_result(data: bytes) -> tuple[str, bytes] | None:
    found = None
    for line in data.split(b"\n"):
        for prefix in RESULT_PREFIXES:
            if line.startswith(prefix.encode()):
                found = (prefix, line[len(prefix):] + b"\n")
    return found


def write_metrics(client, name: str, namespace: str, metrics_dir: Path) -> None:
    from trainctl.backends.reported import metrics
    from trainctl.kube.names import dns_label_problem

    metrics_dir.mkdir()
    for replica, reports in client.backend.reports(name, namespace, whole=True).items():
        series = metrics(reports)
        if series and dns_label_problem(replica) is None:  # a file name that stays in its directory
            lines = (json.dumps({"time": p.time, "step": p.step, "total": p.total, "metrics": p.metrics})
                     for p in series)
            (metrics_dir / f"{replica}.jsonl").write_text("".join(line + "\n" for line in lines))
