"""The local implementation of :class:`trainctl.backends.base.Backend`."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import trainctl
from trainctl import selectors
from trainctl.backends.base import Backend, JobDetails, LogChunk, ReplicaRow, pick_replica
from trainctl.backends.local import processes
from trainctl.backends.local.logs import follow_logs, read_logs
from trainctl.backends.local.store import JobDir, all_job_dirs
from trainctl.core import conditions as cond
from trainctl.core.reconcile import rfc3339
from trainctl.errors import NotFound, UserError
from trainctl.job import Job

SUPERVISOR_START_GRACE_SECONDS = 10.0
GPU_RESOURCE = "nvidia.com/gpu"
# The supervisor runs `python -m` from here, so it imports this very trainctl even when it
# is not installed (a source checkout); replicas still get the submitter's own environment.
IMPORT_ROOT = str(Path(trainctl.__file__).resolve().parent.parent)


class LocalBackend(Backend):
    description = "local"

    def default_namespace(self) -> str:
        return "default"

    # ---- create ----------------------------------------------------------------
    def create(self, resource: dict, replace: bool = False) -> dict:
        metadata = resource["metadata"]
        job_dir = JobDir(metadata.get("namespace") or "default", metadata["name"])
        if job_dir.exists():
            if not replace:
                raise UserError(f'job "{job_dir.name}" already exists in namespace "{job_dir.namespace}" (local): '
                                "delete it first, pick another --name, or use --replace")
            self.delete(job_dir.name, job_dir.namespace)
        job = Job(resource)
        check_commands(job)
        gpus = assign_gpus(job)
        metadata.update(namespace=job_dir.namespace, uid=str(uuid.uuid4()),
                        creationTimestamp=rfc3339(datetime.now(timezone.utc)))
        job_dir.logs.mkdir(parents=True, exist_ok=True)
        job_dir.write_runtime({"uid": metadata["uid"], "workdir": os.getcwd(), "gpus": gpus, "replicas": {}})
        job_dir.write_job(resource)
        note_ignored_images(job_dir, job)
        start_supervisor(job_dir, metadata["uid"])
        return resource

    # ---- read -------------------------------------------------------------------
    def get(self, name: str, namespace: str, kind: str | None = None) -> JobDetails:
        job_dir = JobDir(namespace, name)
        resource = job_dir.read_job()
        if kind and resource["kind"] != kind:  # status tfjob/NAME when NAME is a PyTorchJob
            raise NotFound(f'{kind.lower()} "{name}" not found in namespace "{namespace}" (local backend): '
                           f'"{name}" is a {resource["kind"]}; see trainctl list')
        runtime = job_dir.read_runtime()
        note_lost_supervisor(job_dir, resource, runtime)
        rows = [replica_row(row, runtime) for row in (runtime.get("replicas") or {}).values()]
        order = Job(resource).replica_types
        rows.sort(key=lambda r: (order.index(r.replica_type) if r.replica_type in order else 99, r.index or 0))
        return JobDetails(resource=resource, replicas=rows, events=job_dir.events()[-20:])

    def list(self, namespace: str | None, selector: str | None = None) -> list[dict]:
        wanted = selectors.parse(selector)
        jobs = []
        for job_dir in all_job_dirs(namespace):
            try:
                resource = job_dir.read_job()
            except (UserError, ValueError):
                continue  # deleted while listing
            if wanted.matches(resource["metadata"].get("labels")):
                jobs.append(resource)
        return jobs

    def log_chunks(self, name: str, namespace: str, replica: str | None = None, follow: bool = False,
                   tail: int | None = None, since_seconds: int | None = None, previous: bool = False,
                   kind: str | None = None, timestamps: bool = False) -> Iterator[LogChunk]:
        job_dir = JobDir(namespace, name)
        job = Job(job_dir.read_job())
        names = [job.replica_id(t, i) for t in job.replica_types for i in range(job.replicas(t))]
        if replica is not None:
            names = [pick_replica(replica, name, names)]
        if follow:
            return follow_logs(job_dir, names, tail, since_seconds, lambda: job_is_done(job_dir), timestamps)
        return read_logs(job_dir, names, tail, previous, since_seconds, timestamps)

    # ---- change ---------------------------------------------------------------------
    def delete(self, name: str, namespace: str, kind: str | None = None) -> None:
        job_dir = JobDir(namespace, name)
        resource = job_dir.read_job()
        uid = resource["metadata"]["uid"]
        with job_dir.locked():
            job_dir.job_file.unlink()  # the supervisor sees the job is gone and stops its replicas
        processes.stop_all(processes.SUPERVISOR_MARKER, uid)
        processes.stop_all(processes.MARKER, uid)
        job_dir.remove()

    def set_suspended(self, name: str, namespace: str, suspend: bool, kind: str | None = None) -> dict:
        job_dir = JobDir(namespace, name)
        with job_dir.locked():
            resource = job_dir.read_job()
            if cond.finished((resource.get("status") or {}).get("conditions") or []):
                raise UserError(f'job "{name}" has already finished: nothing to {"suspend" if suspend else "resume"}')
            resource["spec"].setdefault("runPolicy", {})["suspend"] = suspend
            job_dir.write_job(resource)
        if not suspend and not supervisor_alive(job_dir.read_runtime()):
            start_supervisor(job_dir, resource["metadata"]["uid"])
        return resource


# ---- helpers ----------------------------------------------------------------------------

def check_commands(job: Job) -> None:
    """Locally there is no image entrypoint: every replica that runs must have a command."""
    for rtype in job.replica_types:
        container = job.main_container(job.template(rtype)["spec"]["containers"]) or {}
        idle_mpi_worker = job.framework.kind == "MPIJob" and rtype == "Worker"
        if not (container.get("command") or container.get("args")) and not idle_mpi_worker:
            raise UserError(f"{job.framework.replica_spec_field}.{rtype}: the container has no command; the local "
                            "backend runs commands, not images (give one after --, or command: in the YAML)")


def note_ignored_images(job_dir: JobDir, job: Job) -> None:
    """Say once, in the job's events, that processes run here instead of the containers' images."""
    images = sorted({(job.main_container(job.template(t)["spec"]["containers"]) or {}).get("image", "")
                     for t in job.replica_types} - {""})
    if images:
        job_dir.append_event({"type": "Normal", "reason": "ImageIgnored", "time": rfc3339(datetime.now(timezone.utc)),
                              "message": f"the local backend runs each replica's command in {os.getcwd()} with this "
                                         f"machine's Python and tools; image {', '.join(images)} is not used"})


def visible_gpus() -> list[str]:
    """GPU ids this machine offers: $CUDA_VISIBLE_DEVICES if set, else what nvidia-smi lists."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [gpu for gpu in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if gpu.strip()]
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(listing.stdout.splitlines()) if line.startswith("GPU ")]


def assign_gpus(job: Job) -> dict[str, list[str]]:
    """Give each replica its own slice of the GPUs (CUDA_VISIBLE_DEVICES); too few GPUs is an error."""
    wanted = {}
    for rtype in job.replica_types:
        container = job.main_container(job.template(rtype)["spec"]["containers"]) or {}
        per_replica = int(((container.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE, 0))
        for index in range(job.replicas(rtype)):
            if per_replica:
                wanted[job.pod_name(rtype, index)] = per_replica
    if not wanted:
        return {}
    available = visible_gpus()
    if sum(wanted.values()) > len(available):
        raise UserError(f"the job asks for {sum(wanted.values())} GPUs ({GPU_RESOURCE} per replica) but this machine "
                        f"has {len(available)}: lower --gpus or --workers, or run it on a cluster")
    slices, position = {}, 0
    for name, count in wanted.items():
        slices[name] = available[position:position + count]
        position += count
    return slices


def start_supervisor(job_dir: JobDir, uid: str) -> None:
    runtime = job_dir.read_runtime()
    if runtime.pop("supervisor_pid", None):
        job_dir.write_runtime(runtime)  # until the new one records itself, it is found by its marker env
    env = {**os.environ, processes.SUPERVISOR_MARKER: uid}
    with open(job_dir.path / "supervisor.log", "ab") as log:
        subprocess.Popen([sys.executable, "-m", "trainctl.backends.local.supervisor", str(job_dir.path)],
                         env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True, cwd=IMPORT_ROOT)


def supervisor_alive(runtime: dict) -> bool:
    if not runtime.get("supervisor_pid"):
        return bool(runtime.get("uid")) and bool(processes.processes_with(processes.SUPERVISOR_MARKER, runtime["uid"]))
    return processes.alive(runtime["supervisor_pid"])


def supervisor_starting(resource: dict, runtime: dict) -> bool:
    """No pid recorded yet: a supervisor just spawned gets a grace period before it is called lost."""
    if runtime.get("supervisor_pid"):
        return False
    created = datetime.strptime(resource["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    age = datetime.now(timezone.utc) - created.replace(tzinfo=timezone.utc)
    return age.total_seconds() < SUPERVISOR_START_GRACE_SECONDS


def note_lost_supervisor(job_dir: JobDir, resource: dict, runtime: dict) -> None:
    """A supervisor that died (kill -9, reboot) cannot report; say so truthfully in the job's status."""
    conditions = (resource.get("status") or {}).get("conditions") or []
    if cond.finished(conditions) or supervisor_alive(runtime) or supervisor_starting(resource, runtime):
        return
    running = [row["name"] for row in (runtime.get("replicas") or {}).values() if processes.alive(row.get("pid"))]
    kind, name = resource["kind"], resource["metadata"]["name"]
    message = (f"{kind} {name}: its supervisor (pid {runtime.get('supervisor_pid')}) is gone, so nothing watches "
               f"or restarts the replicas; {len(running)} replica process(es) still running"
               f"{' (' + ', '.join(running) + ')' if running else ''}. Run trainctl delete {name} to clean up.")
    stamp = rfc3339(datetime.now(timezone.utc))
    status = resource.setdefault("status", {})
    status["conditions"] = cond.set_condition(conditions, "Failed", "True", f"{kind}SupervisorLost", message, stamp)
    status.setdefault("completionTime", stamp)
    with job_dir.locked():
        job_dir.write_job(resource)


def replica_row(row: dict, runtime: dict) -> ReplicaRow:
    """One replica as the supervisor last recorded it, corrected by /proc when no supervisor watches it."""
    state, reason = row.get("state", "Pending"), row.get("reason", "")
    if state == "Running" and not supervisor_alive(runtime):
        if processes.alive(row.get("pid")):
            state = "Running (unsupervised)"
        else:  # it ended after its supervisor died: nobody saw its exit code
            state, reason = "Ended (unsupervised)", "exit code unknown: supervisor lost"
    return ReplicaRow(name=row["name"], replica_type=row["rtype"], index=row["index"], state=state,
                      restarts=row.get("restarts", 0), exit_code=row.get("exit_code"), reason=reason,
                      node="localhost", started=row.get("started"), finished=row.get("finished"))


def job_is_done(job_dir: JobDir) -> bool:
    """Finished and nothing of it runs any more (or deleted)."""
    try:
        resource = job_dir.read_job()
    except UserError:
        return True
    if not cond.finished((resource.get("status") or {}).get("conditions") or []):
        return False
    runtime = job_dir.read_runtime()
    return not any(processes.alive(row.get("pid")) and row.get("state") == "Running"
                   for row in (runtime.get("replicas") or {}).values())
