"""The local implementation of :class:`trainctl.backends.base.Backend`.

Reading commands (get, list, logs) never write: what they conclude from the state on disk
(a lost supervisor, a damaged file) is computed on every read and shown, not stored, so an
unreadable or momentarily odd file can never turn into a permanent verdict.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import trainctl
from trainctl.backends.base import CRASH_LOOP, Backend, JobDetails, LogChunk, ReplicaReports, ReplicaRow, pick_replica
from trainctl.backends.local import processes
from trainctl.backends.local.logs import follow_logs, read_logs, report_lines
from trainctl.backends.local.store import (AlreadyExists, DamagedState, JobDir, all_job_dirs, remove_function_files,
                                           stored_window)
from trainctl.core import conditions as cond
from trainctl.core.job import KUEUE_QUEUE_LABEL, Job
from trainctl.core.times import rfc3339
from trainctl.core.trainjob import is_trainjob, planned_pods, with_default_runtime, with_local_path
from trainctl.errors import NotFound, UserError, shortened, spelled
from trainctl.frameworks.base import ANCESTOR_TRAINER, LABEL_ANCESTOR_STEP
from trainctl.kube import selectors

if TYPE_CHECKING:
    from trainctl.code.snapshot import Snapshot

SUPERVISOR_START_GRACE_SECONDS = 10.0
SUPERVISOR_START_GRACE_ENV = "TRAINCTL_SUPERVISOR_START_GRACE"  # seconds; tests shorten it
DELETE_LOCK_WAIT_SECONDS = 5.0
# Every local replica is a process on this one machine; past this a job is a typo (or a generator's
# int32), not a plan, and would only fork until the machine stops answering.
MAX_LOCAL_REPLICAS = 256
GPU_RESOURCE = "nvidia.com/gpu"
WORKSPACE = "workspace"  # in the job's directory: where a --workdir snapshot is unpacked and the replicas run
# The supervisor runs `python -m` from here, so it imports this very trainctl even when it
# is not installed (a source checkout); replicas still get the submitter's own environment.
IMPORT_ROOT = str(Path(trainctl.__file__).resolve().parent.parent)


class LocalBackend(Backend):
    description = "local"
    reads_reports_cheaply = True

    def default_namespace(self) -> str:
        return "default"

    # ---- create ----------------------------------------------------------------
    def create(self, resource: dict, replace: bool = False, preflight: bool = True,
               snapshot: Snapshot | None = None, dry_run: bool = False) -> dict:
        import uuid  # here: it loads platform, which the reading commands never need

        metadata = resource["metadata"]
        job_dir = JobDir(metadata.get("namespace") or "default", metadata["name"])
        if is_trainjob(resource):  # no cluster holds its runtime: one of trainctl's own, if it names one
            check_replica_count(metadata["name"], planned_pods(resource) or 0)  # from its numbers, before any plan
            with_default_runtime(resource)
        job = Job(resource)
        check_replica_count(job.name, job.total_replicas)
        check_commands(job)
        check_pod_paths(job)
        check_checkpoint_path(resource)
        check_not_queued(job)
        check_managed_here(job)
        if preflight:  # before a replaced job is deleted: a failed check changes nothing
            from trainctl.backends.local import preflight as checks

            checks.check(job, snapshot.source if snapshot else os.getcwd())
        if job_dir.path.exists() and not replace:
            raise AlreadyExists(job_dir)
        gpus = assign_gpus(job)  # too few GPUs here: refused, dry run or not, before a replaced job goes
        if dry_run:
            return resource
        if replace and job_dir.path.exists():  # never without replace: another creator may have won meanwhile
            with contextlib.suppress(NotFound):  # another --replace of the same name deleted it first
                self.delete(job_dir.name, job_dir.namespace)
        resource.pop("status", None)  # observed, never submitted: the API server drops it on create too
        metadata.update(namespace=job_dir.namespace, uid=str(uuid.uuid4()),
                        creationTimestamp=rfc3339(datetime.now(timezone.utc)))
        try:
            with job_dir.create() as draft:
                write_new_job(draft, resource, job, gpus, snapshot, job_dir.path / WORKSPACE)
            try:
                start_supervisor(job_dir, metadata["uid"])
            except BaseException:
                job_dir.remove()  # no process of it started: a job nobody runs must not stay behind
                raise
        except OSError as err:
            raise UserError(f'cannot create job "{job_dir.name}" in {job_dir.path.parent}: {err.strerror or err}; '
                            "nothing was created (free some space, or set TRAINCTL_HOME elsewhere)") from None
        return resource

    # ---- read -------------------------------------------------------------------
    def get(self, name: str, namespace: str, kind: str | None = None) -> JobDetails:
        job_dir = JobDir(namespace, name)
        resource = job_dir.read_job()
        if kind and resource["kind"] != kind:  # status tfjob/NAME when NAME is a PyTorchJob
            raise NotFound(f'{kind.lower()} "{name}" not found in namespace "{namespace}" (local backend): '
                           f'"{name}" is a {resource["kind"]}; see trainctl list')
        events = job_dir.events()[-20:]
        try:
            runtime = job_dir.read_runtime()
        except DamagedState as damage:  # the supervisor rewrites it each second if it runs; say so meanwhile
            runtime = {}
            events.append({"type": "Warning", "reason": "StateDamaged", "message": damage.message,
                           "time": rfc3339(datetime.now(timezone.utc))})
        resource = with_lost_supervisor(resource, runtime)
        finished = cond.has_finished(resource)
        rows = [replica_row(row, runtime, finished) for row in (runtime.get("replicas") or {}).values()]
        order = Job(resource).replica_types
        rows.sort(key=lambda r: (order.index(r.replica_type) if r.replica_type in order else 99, r.index or 0))
        return JobDetails(resource=resource, replicas=rows, events=events)

    def list(self, namespace: str | None, selector: str | None = None) -> list[dict]:
        wanted = selectors.parse(selector)
        jobs = []
        for job_dir in all_job_dirs(namespace):
            try:
                resource = listed_resource(job_dir)
            except NotFound:
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
        if follow and not job_is_done(job_dir):  # a finished job's logs are merged in time order even with -f
            return follow_logs(job_dir, names, tail, since_seconds, lambda: job_is_done(job_dir), timestamps)
        return read_logs(job_dir, names, tail, previous, since_seconds, timestamps)

    def reports(self, name: str, namespace: str, whole: bool = False,
                details: JobDetails | None = None) -> dict[str, ReplicaReports]:
        """From each replica's progress file (the supervisor names it in TRAINCTL_PROGRESS); its last output is
        when its log or that file last changed."""
        job_dir = JobDir(namespace, name)
        job = Job(details.resource if details is not None else job_dir.read_job())
        found = {}
        for replica in (job.replica_id(t, i) for t in job.replica_types for i in range(job.replicas(t))):
            path = job_dir.progress_file(replica)
            times = [modified(path), modified(job_dir.log_file(replica))]
            found[replica] = ReplicaReports(replica, report_lines(path, whole),
                                            max((t for t in times if t is not None), default=None))
        return found

    # ---- change ---------------------------------------------------------------------
    def delete(self, name: str, namespace: str, kind: str | None = None) -> None:
        """Stop every process of the job and remove it, whatever state its files are in."""
        from trainctl.backends.local import containment  # here: the reading commands never need it

        job_dir = JobDir(namespace, name)
        if not job_dir.path.is_dir():
            raise job_dir.not_found()
        uids = job_dir.uids()  # from the uid file even when job.json and runtime.json are damaged
        records = job_dir.containment_records()  # the replicas' cgroups, from a file of their own too
        with contextlib.suppress(UserError):
            records.append(job_dir.read_runtime().get("containment"))
        try:
            resource = job_dir.read_job()  # before it goes: a function job's files are named in it
        except UserError:
            resource = None  # damaged: its function files (if any) are named nowhere readable and stay
        # A supervisor that holds the lock too long (hung, or busy) must not keep delete from stopping it:
        # past the wait the processes are stopped anyway, and nothing is left to write the files again.
        with job_dir.locked(timeout=DELETE_LOCK_WAIT_SECONDS):
            job_dir.job_file.unlink(missing_ok=True)  # the supervisor sees the job is gone and stops its replicas
        for uid in uids:
            processes.stop_all(functools.partial(processes.processes_with, processes.SUPERVISOR_MARKER, uid))
            containment.stop_job(uid, containment.recorded_cgroups(records, uid))
        remove_function_files(resource)  # before the job: once it is gone, so are they
        job_dir.remove()

    def set_suspended(self, name: str, namespace: str, suspend: bool, kind: str | None = None) -> dict:
        job_dir = JobDir(namespace, name)
        job_dir.read_job()  # NotFound before the lock, whose file lives in the job's directory
        with job_dir.locked():
            resource = job_dir.read_job()
            if supervisor_lost(resource, job_dir.read_runtime()):
                raise UserError(f'job "{name}" lost its supervisor, so nothing can {"suspend" if suspend else "resume"} '
                                f"it: {spelled(f'trainctl delete {name}', f'client.delete({name!r})')} stops what is "
                                "left; then submit it again")
            if cond.has_finished(resource):
                raise UserError(f'job "{name}" has already finished: nothing to {"suspend" if suspend else "resume"}')
            if is_trainjob(resource):  # a TrainJob's own field; a v1 job's is in its runPolicy
                resource["spec"]["suspend"] = suspend
            else:
                resource["spec"].setdefault("runPolicy", {})["suspend"] = suspend
            try:
                job_dir.write_job(resource)
            except OSError as err:
                raise UserError(f'cannot {"suspend" if suspend else "resume"} job "{name}": writing {job_dir.job_file} '
                                f"failed ({err.strerror or err}); nothing changed, try again once it can be written") from None
        if not suspend and not supervisor_alive(job_dir.read_runtime()):
            start_supervisor(job_dir, resource["metadata"]["uid"])
        return resource


# ---- helpers ----------------------------------------------------------------------------


def check_replica_count(name: str, replicas: int) -> None:
    if replicas > MAX_LOCAL_REPLICAS:
        raise UserError(f'job "{name}" has {replicas:,} replicas; the local backend runs at most '
                        f"{MAX_LOCAL_REPLICAS} processes on this machine: lower its replica count, or run it on a cluster")


def check_not_queued(job: Job) -> None:
    """A job created suspended for Kueue waits for an admission no local run ever gets."""
    queue = (job.resource["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL)
    if queue and job.run_policy.get("suspend"):
        field = "spec.suspend" if is_trainjob(job.resource) else "runPolicy.suspend"
        raise UserError(f"{job.name} waits for Kueue (label {KUEUE_QUEUE_LABEL}={queue}, {field}: true), "
                        "which admits jobs on Kubernetes only: run it on a cluster, or leave the queue out locally")


def check_managed_here(job: Job) -> None:
    """A job another controller manages (MultiKueue, which runs it on a worker cluster) would stay Pending for
    ever: no local run has that controller."""
    if job.managed_externally:
        field = "spec.managedBy" if is_trainjob(job.resource) else "spec.runPolicy.managedBy"
        raise UserError(f"{job.name}: {field}: {job.run_policy['managedBy']} runs it, on one of its worker clusters, "
                        f"and nothing local ever would: leave {field} out to run it here, or submit it to the "
                        "MultiKueue manager cluster")


def check_commands(job: Job) -> None:
    """Locally there is no image: every replica that runs must name its command, where a container
    with no ``command`` (only ``args``, or neither) relies on its image's ENTRYPOINT."""
    for rtype in job.replica_types:
        container = job.main_container(job.template(rtype)["spec"]["containers"]) or {}
        args = container.get("args") or []
        # a TrainJob's idle pods (MPI's nodes, whose image serves sshd on a cluster) idle here whatever they name
        idle_here = rtype in (job.node_plan.idle if job.node_plan is not None else {})
        if container.get("command") or (job.framework.idle_command(rtype) and not args) or idle_here:
            continue
        given = f"only args ({' '.join(args[:2])}{' ...' if len(args) > 2 else ''})" if args else "no command"
        raise UserError(f"{job.framework.replica_spec_field}.{rtype}: the container names {given} and relies on its "
                        "image's entrypoint, which the local backend cannot run (its replicas are processes, not "
                        f"images): {command_advice(job, rtype)}; on a cluster the image supplies it")


def command_advice(job: Job, rtype: str) -> str:
    """Where the command of replica type ``rtype`` can come from. A TrainJob's command (its ``trainer.command``,
    ``apply --entrypoint``, run()'s list) reaches only its runtime's trainer step, so any other step's (upstream's
    initializers, a runtime that labels no step the trainer) is the runtime's to give."""
    trainer = job.node_plan.trainer if job.node_plan is not None else rtype
    if trainer == rtype:
        return spelled("give the command after -- on submit, as command: in the YAML, or with apply --entrypoint "
                       "'python train.py' (its args follow)", "give run() the command list, or command: in the resource")
    if trainer is None:
        return (f"the TrainJob's command goes to the runtime's trainer step, and the runtime labels no replicatedJob "
                f"{LABEL_ANCESTOR_STEP}: {ANCESTOR_TRAINER}: label the one that trains, or give its container a "
                "command in the runtime")
    return (f"the TrainJob's command reaches only the runtime's trainer step ({trainer}): give the {rtype} container "
            "a command in the runtime")


def check_pod_paths(job: Job) -> None:
    """A TrainJob's command names a file its runtime mounts into the pod (MPI's hostfile) where the local copy cannot
    stand in: inside a longer word (a shell script), not as a word of its own or after ``=``."""
    for rtype, files in (job.node_plan.files if job.node_plan is not None else {}).items():
        container = job.main_container(job.template(rtype)["spec"]["containers"]) if rtype in job.replica_types else {}
        for word in [*((container or {}).get("command") or []), *((container or {}).get("args") or [])]:
            inside = [path for path in files if path in with_local_path(word, dict.fromkeys(files, ""))]
            if inside:
                raise UserError(f"TrainJob {job.name}: the {rtype} command names {inside[0]} inside "
                                f"{shortened(word, 60)!r}; locally the file is a copy in the job's directory, which "
                                "replaces that path only where it is a "
                                f"word of its own or follows '=': write {inside[0]} so, or run the job on a cluster")


def check_checkpoint_path(resource: dict) -> None:
    """A ``host:`` checkpoint path is this machine's: refused where its links lead into a system directory."""
    from trainctl.core.checkpoint_volume import ANNOTATION, local_problem

    if issue := local_problem(resource):
        given = resource["metadata"]["annotations"][ANNOTATION]
        # a path is shown whole up to a generous bound: its end is what tells two paths apart
        raise UserError(f"--checkpoints (annotation {ANNOTATION}) {shortened(repr(given), 240, end=60)}: {issue}")


def write_new_job(draft: JobDir, resource: dict, job: Job, gpus: dict[str, list[str]],
                  snapshot: Snapshot | None, workspace: Path) -> None:
    """Every file a new job starts with, in its draft directory (see JobDir.create); with a snapshot,
    its files unpacked in the job's own workspace (``workspace`` once the draft is in place)."""
    draft.logs.mkdir()
    from trainctl.code.pods import replica_library

    for name, data in replica_library(draft.replica_lib.name).items():  # trainctl.report() in every replica
        (draft.path / name).parent.mkdir(parents=True, exist_ok=True)
        (draft.path / name).write_bytes(data)
    for empty in ("supervisor.log", ".lock"):  # created now, so delete and the supervisor never need new files
        (draft.path / empty).touch()
    draft.uid_file.write_text(resource["metadata"]["uid"])
    if snapshot is not None:
        from trainctl.code import unpack

        unpack.extract(snapshot.archive.stream(), str(draft.path / WORKSPACE))
    workdir = str(workspace) if snapshot is not None else os.getcwd()
    draft.write_runtime({"uid": resource["metadata"]["uid"], "workdir": workdir, "gpus": gpus, "replicas": {}})
    draft.write_job(resource)
    note_ignored_images(draft, job, workdir)


def listed_resource(job_dir: JobDir) -> dict:
    """The job as ``list`` shows it: with a lost supervisor's verdict, or a stand-in naming the damage."""
    try:
        resource = job_dir.read_job()
        metadata = resource.get("metadata") or {}
        if (metadata.get("name"), metadata.get("namespace")) != (job_dir.name, job_dir.namespace):
            raise DamagedState(job_dir, job_dir.job_file, "it names another job")
    except DamagedState as damage:
        return {"apiVersion": "kubeflow.org/v1", "kind": "Unknown",
                "metadata": {"name": job_dir.name, "namespace": job_dir.namespace},
                "status": {"conditions": [{"type": "Damaged", "status": "True", "reason": "StateDamaged",
                                           "message": damage.message}]}}
    if cond.has_finished(resource):
        return resource  # the common case costs no runtime read
    try:
        return with_lost_supervisor(resource, job_dir.read_runtime())
    except DamagedState:
        return with_lost_supervisor(resource, {})


def note_ignored_images(job_dir: JobDir, job: Job, workdir: str) -> None:
    """Say once, in the job's events, that processes run here instead of the containers' images."""
    images = sorted(set(job.images.values()) - {""})
    if images:
        job_dir.append_event({"type": "Normal", "reason": "ImageIgnored", "time": rfc3339(datetime.now(timezone.utc)),
                              "message": f"the local backend runs each replica's command in {workdir} with this "
                                         f"machine's Python and tools; image {', '.join(images)} is not used"})


def visible_gpus() -> list[str]:
    """GPU ids this machine offers: $CUDA_VISIBLE_DEVICES if set, else what nvidia-smi lists."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [gpu for gpu in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if gpu.strip()]
    import subprocess  # here: reading commands never start a process

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
                        f"has {len(available)}: ask for fewer GPUs or replicas, or run it on a cluster")
    slices, position = {}, 0
    for name, count in wanted.items():
        slices[name] = available[position:position + count]
        position += count
    return slices


def start_supervisor(job_dir: JobDir, uid: str) -> None:
    runtime = job_dir.read_runtime()
    if runtime.pop("supervisor_pid", None):
        job_dir.write_runtime(runtime)  # until the new one records itself, it is found by its marker env
    import subprocess

    env = {**os.environ, processes.SUPERVISOR_MARKER: uid}
    with open(job_dir.path / "supervisor.log", "ab") as log:
        subprocess.Popen([sys.executable, "-m", "trainctl.backends.local.supervisor", str(job_dir.path)],
                         env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True, cwd=IMPORT_ROOT)


def supervisor_alive(runtime: dict, uid: str | None = None) -> bool:
    """The recorded supervisor pid runs; without one (just started, or an unreadable table), a
    process carrying the job's supervisor marker does."""
    uid, pid = uid or runtime.get("uid"), runtime.get("supervisor_pid")
    if not pid:
        return bool(uid) and bool(processes.processes_with(processes.SUPERVISOR_MARKER, uid))
    return processes.alive(pid) and (not uid or processes.carries(pid, processes.SUPERVISOR_MARKER, uid))


def supervisor_starting(resource: dict, runtime: dict) -> bool:
    """No pid recorded yet: a supervisor just spawned gets a grace period before it is called lost."""
    if runtime.get("supervisor_pid"):
        return False
    created = datetime.strptime(resource["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    age = datetime.now(timezone.utc) - created.replace(tzinfo=timezone.utc)
    return age.total_seconds() < supervisor_start_grace()


def supervisor_start_grace() -> float:
    """Seconds a just-spawned supervisor has to record itself: 10, or $TRAINCTL_SUPERVISOR_START_GRACE."""
    given = os.environ.get(SUPERVISOR_START_GRACE_ENV)
    if not given:
        return SUPERVISOR_START_GRACE_SECONDS
    try:
        return float(given)
    except ValueError:
        raise UserError(f"{SUPERVISOR_START_GRACE_ENV}={given!r} is not a number of seconds: "
                        f"give one (e.g. 10), or unset it for the default of 10") from None


def supervisor_lost(resource: dict, runtime: dict) -> bool:
    """Unfinished, and no supervisor runs or is starting for it (kill -9, reboot).

    A suspended job of which nothing runs has nothing to watch: it is not lost, and
    ``resume`` starts a new supervisor for it.
    """
    uid = resource["metadata"].get("uid")
    if cond.has_finished(resource) or supervisor_alive(runtime, uid) or supervisor_starting(resource, runtime):
        return False
    return not (cond.reached(resource, "Suspended") and not processes.processes_with(processes.MARKER, uid or "-"))


def with_lost_supervisor(resource: dict, runtime: dict) -> dict:
    """The job as it truly stands when its supervisor is lost: Failed, with what still runs.

    Computed on every read and never stored, so a reading command writes nothing and a
    table it cannot read cannot fail the job for good; the time is the supervisor's last
    heartbeat, so every read tells the same story.
    """
    if not supervisor_lost(resource, runtime):
        return resource
    running = [row["name"] for row in (runtime.get("replicas") or {}).values() if processes.alive(row.get("pid"))]
    kind, name = resource["kind"], resource["metadata"]["name"]
    message = (f"{kind} {name}: its supervisor (pid {runtime.get('supervisor_pid')}) is gone, so nothing watches "
               f"or restarts the replicas; {len(running)} replica process(es) still running"
               f"{' (' + ', '.join(running) + ')' if running else ''}. Run trainctl delete {name} to clean up.")
    heartbeat = runtime.get("heartbeat")
    seen = datetime.fromtimestamp(heartbeat, timezone.utc) if isinstance(heartbeat, (int, float)) else None
    stamp = rfc3339(seen or datetime.now(timezone.utc))
    status = dict(cond.status_of(resource))
    status["conditions"] = cond.set_condition(cond.conditions_of(resource), "Failed", "True",
                                              f"{kind}SupervisorLost", message, stamp)
    status.setdefault("completionTime", stamp)
    return {**resource, "status": status}


NOT_RESTARTED = "Not restarted (job ended)"  # kubectl would show no pod; a newcomer reads "Deleted" as lost


def replica_row(row: dict, runtime: dict, job_finished: bool = False) -> ReplicaRow:
    """One replica as the supervisor last recorded it, corrected by /proc when no supervisor watches it."""
    state, reason = row.get("state", "Pending"), row.get("reason", "")
    if state == CRASH_LOOP and job_finished:  # the job ended while it waited to restart: it never will
        state = NOT_RESTARTED
    if state == "Running" and not supervisor_alive(runtime):
        if processes.alive(row.get("pid")):
            state = "Running (unsupervised)"
        else:  # it ended after its supervisor died: nobody saw its exit code
            state, reason = "Ended (unsupervised)", "exit code unknown: supervisor lost"
    return ReplicaRow(name=row["name"], replica_type=row["rtype"], index=row["index"], state=state,
                      restarts=row.get("restarts", 0), exit_code=row.get("exit_code"), reason=reason,
                      node="localhost", started=row.get("started"), finished=row.get("finished"),
                      last_exit_code=row.get("last_exit_code"), last_reason=row.get("last_reason", ""),
                      last_finished=row.get("last_finished"), message=text(row.get("message")),
                      last_message=text(row.get("last_message")), exit_window=stored_window(row.get("exit_window")),
                      last_exit_window=stored_window(row.get("last_exit_window")), stopped=row.get("stopped") is True)


def modified(path: Path) -> float | None:
    """When ``path`` (itself, not what a link there names: the job's files are its replicas' to shape) changed."""
    try:
        return path.lstat().st_mtime
    except OSError:
        return None


def text(value: object) -> str:
    return value if isinstance(value, str) else ""


def job_is_done(job_dir: JobDir) -> bool:
    """Finished and nothing of it runs any more (or deleted)."""
    try:
        resource = job_dir.read_job()
    except NotFound:
        return True
    except DamagedState:
        return False  # the supervisor may be rewriting it; delete is the way out of a damaged job
    try:
        runtime = job_dir.read_runtime()
    except DamagedState:
        runtime = {}
    if not cond.has_finished(with_lost_supervisor(resource, runtime)):
        return False
    return not any(processes.alive(row.get("pid")) and row.get("state") == "Running"
                   for row in (runtime.get("replicas") or {}).values())
