"""The detached supervisor of one local job: ``python -m trainctl.backends.local.supervisor DIR``.

It is to a local job what kubelet plus the operator are to a cluster job: it observes
the replica processes, asks the shared reconcile core what to do, does it (start,
stop, restart processes; write status and events), and sleeps until the next process
exit or time-based event. It outlives the shell that submitted the job and exits once
the job has finished and nothing of it runs any more (or after its TTL deleted it).

It must outlive trouble with its own files, because while it lives the replicas are
watched and when it dies they are not: a write that fails (a full disk) is logged and
tried again on the next pass, and a job.json it cannot read (damaged) makes it hold
still, replicas untouched, until the file is readable again or ``delete`` removes it.
A replica it cannot start at all (a command that does not exist, a NUL in its
environment that a job.json written by hand let through) is a failed run with reason
``StartError`` and exit code 128, as kubelet reports a container that cannot start.

Each replica runs inside the containment this supervisor found when it started
(containment.py: its own cgroup, else a PID namespace), which is ended with it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

from trainctl import reporting
from trainctl.backends.base import CRASH_LOOP
from trainctl.checkpoints import CHECKPOINT_DIR_ENV, PREEMPTING_ENV
from trainctl.backends.local import containment, processes
from trainctl.backends.local.backend import visible_gpus
from trainctl.backends.local.store import (DamagedState, JobDir, all_recorded_ports, append_line, open_own_file,
                                           remove_function_files, remove_odd, stored_window, write_text)
from trainctl.code.regular import open_regular, read_prefix, unreadable
from trainctl.core import conditions as cond
from trainctl.core.actions import CreateReplica, DeleteJob, DeleteReplica, RecordEvent
from trainctl.core.attribution import Run
from trainctl.core.checkpoint_volume import local_directory
from trainctl.core.job import Job
from trainctl.core.network import LocalNetwork
from trainctl.core.observed import ObservedReplica
from trainctl.core.reconcile import reconcile, rfc3339
from trainctl.core.restarts import ATTEMPT_LABEL
from trainctl.functions.runner import TERMINATION_LOG_ENV

TICK_SECONDS = 0.1  # how often process exits are noticed; the deadline is met within this
# Like kubelet's CrashLoopBackOff, but starting small so a flaky replica comes back quickly.
RESTART_DELAY_SECONDS, RESTART_DELAY_MAX_SECONDS = 0.5, 10.0
HEARTBEAT_SECONDS = 1.0
TROUBLE_RETRY_SECONDS = 0.5  # after a failed write or an unreadable job.json
STOP_EXIT_CODES = (128 + signal.SIGTERM, 128 + signal.SIGKILL)  # what processes.stop_group ends a replica with
# kubelet's limits: a termination message keeps 4096 bytes; FallbackToLogsOnError, the log's last 80 lines
# within 2048 bytes
MAX_TERMINATION_MESSAGE_BYTES, LOG_FALLBACK_LINES, LOG_FALLBACK_BYTES = 4096, 80, 2048
# kubelet's answer to a container that cannot start: its reason and exit code
START_ERROR, START_ERROR_CODE = "StartError", 128
# what Popen raises for a command that cannot run here: a missing or non-executable file (OSError), a NUL
# in a word or the environment (ValueError), a word that is no string in a hand-edited job.json
# (TypeError), a failed entry into the replica's cgroup (SubprocessError)
START_ERRORS = (OSError, ValueError, TypeError, subprocess.SubprocessError)


class Replica:
    """A replica process this supervisor started (or the record of one that ended)."""

    def __init__(self, action: CreateReplica, process: subprocess.Popen | None, restarts: int, replica_id: str,
                 job_dir: JobDir, last_run: dict | None = None) -> None:
        """``process`` None: it could not be started, a run that failed at once (START_ERROR)."""
        self.action, self.process, self.restarts = action, process, restarts
        self.last_run = last_run or {}  # the run before this one (as_last_run()), shown like kubectl's lastState
        self.replica_id = replica_id  # e.g. worker-1: names its log files
        self.job_dir = job_dir  # where its log and termination message are
        self.indexed_size = 0
        self.started_at, self.start_time = rfc3339(datetime.now(timezone.utc)), time.time()
        self.finished_at: str | None = None if process else self.started_at
        self.exit_window: tuple[float, float] | None = None if process else (self.start_time, self.start_time)
        self.exit_code: int | None = None if process else START_ERROR_CODE
        self.message = "" if process else termination_message(job_dir, replica_id, failed=True)

    def poll(self, previous_poll: float) -> bool:
        """Notice the process's exit, and say whether it was just seen to end; ``previous_poll``: when it was
        last seen running (its exit comes after). While it runs, what it has written as its termination
        message so far: a function that raised is on its way out, though its shutdown may take a while
        (torch's process group), and said so already."""
        if self.exit_code is not None:
            return False
        if self.process.poll() is None:
            self.message = read_termination_file(self.job_dir.termination_file(self.replica_id))
            return False
        code = self.process.returncode
        self.exit_code = 128 - code if code < 0 else code  # killed by signal N -> 128+N, as in a container
        self.finished_at = rfc3339(datetime.now(timezone.utc))
        self.exit_window = (max(previous_poll, self.start_time), time.time())
        self.message = termination_message(self.job_dir, self.replica_id, failed=self.exit_code != 0)
        return True

    def observed(self) -> ObservedReplica:
        phase = "Running" if self.exit_code is None else ("Succeeded" if self.exit_code == 0 else "Failed")
        reason = START_ERROR if self.process is None else exit_reason(self.exit_code)
        last = self.last_run
        return ObservedReplica(self.action.rtype, self.action.index, self.action.name, phase, self.exit_code,
                               started_at=self.started_at, finished_at=self.finished_at,
                               reason="" if self.exit_code in (None, 0) else reason,
                               message=self.message, exit_window=self.exit_window,
                               last_exit_code=last.get("last_exit_code"), last_reason=last.get("last_reason", ""),
                               last_finished_at=last.get("last_finished"), last_message=last.get("last_message", ""),
                               last_exit_window=stored_window(last.get("last_exit_window")),
                               attempt=attempt_of(self.action.labels))

    def row(self) -> dict:
        return {"name": self.action.name, "rtype": self.action.rtype, "index": self.action.index,
                "pid": self.process and self.process.pid, "state": self.observed().phase, "exit_code": self.exit_code,
                "restarts": self.restarts, "started": self.started_at, "finished": self.finished_at,
                "reason": self.observed().reason, "message": self.message, "exit_window": self.exit_window,
                **self.last_run}

    def as_last_run(self) -> dict:
        """This ended run as the row fields of the run before the next one."""
        return {"last_exit_code": self.exit_code, "last_reason": self.observed().reason,
                "last_finished": self.finished_at, "last_message": self.message,
                "last_exit_window": self.exit_window}


def attempt_of(labels: dict) -> int:
    """The job's attempt a replica was started for (its labels, as a pod's; 0 without)."""
    value = labels.get(ATTEMPT_LABEL, "")
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def grace_seconds(resource: dict, rtype: str) -> float:
    """The replica's grace period between SIGTERM and SIGKILL: its pod template's terminationGracePeriodSeconds,
    as kubelet gives a pod, else the local default (a local stop should not keep a terminal waiting 30 s)."""
    seconds = Job(resource).template(rtype)["spec"].get("terminationGracePeriodSeconds")
    return float(seconds) if type(seconds) is int and seconds >= 0 else processes.GRACE_SECONDS


def read_termination_file(path: Path) -> str:
    """Its first 4096 bytes, as kubelet keeps; '' when there is none. The file is the replica's to write:
    anything but a regular file (a link, a FIFO that would block this read, a device) is not read."""
    with contextlib.suppress(OSError):
        return read_prefix(path, MAX_TERMINATION_MESSAGE_BYTES, follow_symlinks=False).decode(errors="replace")
    return ""


def termination_message(job_dir: JobDir, replica_id: str, failed: bool) -> str:
    """What kubelet would make the ended run's termination message: what it wrote to its termination file
    (then removed, so the next run starts without it), or for a failed run that wrote nothing the tail of its
    log (FallbackToLogsOnError)."""
    path = job_dir.termination_file(replica_id)
    written = read_termination_file(path)
    with contextlib.suppress(OSError):
        remove_odd(path)
    if written or not failed:
        return written
    return log_tail(job_dir.log_file(replica_id))


def log_tail(log_file: Path) -> str:
    """The last lines of a replica's log within kubelet's bound; for a log the replica replaced (a link to
    /dev/zero, a FIFO), one line saying so."""
    try:
        log, status = open_regular(log_file, follow_symlinks=False)
    except FileNotFoundError:
        return ""
    except OSError as error:  # NotRegular too
        return unreadable(f"{log_file.parent.name}/{log_file.name}", error)
    with log:
        log.seek(max(0, status.st_size - LOG_FALLBACK_BYTES))
        data = log.read(LOG_FALLBACK_BYTES)
    return "\n".join(data.decode(errors="replace").splitlines()[-LOG_FALLBACK_LINES:])


@functools.cache
def machine_has_gpus() -> bool:
    """Whether this machine offers GPUs ($CUDA_VISIBLE_DEVICES, else nvidia-smi), asked once per supervisor."""
    return bool(visible_gpus())


def cpu_share(replicas: int) -> int:
    """Cores per replica when all replicas share this machine, as a pod's CPU share would be.

    Without it every replica's OpenMP/BLAS pool takes every core, and N replicas oversubscribe
    the machine N times over (torchrun sets 1 for the same reason). An explicit
    OMP_NUM_THREADS, in the submitting shell or the container's env, wins.
    """
    return max(1, (os.cpu_count() or 1) // max(1, replicas))


def exit_reason(code: int) -> str:
    signals = {128 + signal.SIGKILL: "Killed", 128 + signal.SIGTERM: "Terminated", 128 + signal.SIGSEGV: "Segfault"}
    return signals.get(code, "Error")


class Supervisor:
    def __init__(self, job_dir: JobDir) -> None:
        self.dir = job_dir
        self.runtime = job_dir.read_runtime()
        self.replicas: dict[str, Replica] = {}
        self.deleted: dict[str, dict] = {}  # rows of replicas that ended and were cleaned up
        self.restarts: dict[str, int] = {}
        self.last_runs: dict[str, dict] = {}  # per replica name: its run before the current one
        self.not_before: dict[str, float] = {}  # restart back-off per replica name
        self.stop_by: dict[str, float] = {}  # replicas told to stop (SIGTERM sent): when their grace period ends
        self.last_heartbeat = 0.0
        self.last_poll = 0.0  # when the replicas were last seen: a process found ended exited after it
        self.stopping = False
        self.last_trouble = ""  # logged once per kind of trouble, not once per pass
        self.containment = containment.Containment("marker")  # until contain() finds what this machine allows

    # ---- main loop ---------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        self.contain()
        while not self.stopping:
            if not self.dir.exists():
                self.stop_everything()
                return 0
            try:
                plan_wait, done = self.step()
                if done:
                    self.write_runtime(force=True)  # fails on a full disk: then try again, the end must be recorded
                    self.containment.end_job()
                    return 0
            except (OSError, DamagedState) as trouble:
                self.note_trouble(trouble)
                plan_wait = TROUBLE_RETRY_SECONDS
            except Exception as error:  # noqa: BLE001 - a bug of trainctl's: the job must say so, not "supervisor lost"
                self.fail_on_internal_error(error)
                return 1
            else:
                self.last_trouble = ""
            time.sleep(min(TICK_SECONDS, plan_wait) if plan_wait is not None else TICK_SECONDS)
        self.stop_everything()
        return 0

    def fail_on_internal_error(self, error: Exception) -> None:
        """A pass that raised what no job should make it raise (a bug): the traceback into supervisor.log, the job
        Failed naming the error where status and wait show it, its replicas stopped. Never a bare "supervisor
        lost" after ``apply`` said 0."""
        traceback.print_exc(file=sys.stderr)
        where = traceback.extract_tb(error.__traceback__)[-1]
        text = f"{type(error).__name__}{': ' + str(error) if str(error) else ''} at {Path(where.filename).name}:" \
               f"{where.lineno}"
        self.stop_everything()
        with contextlib.suppress(OSError, DamagedState), self.dir.locked():
            resource = self.dir.read_job()
            kind, name = resource.get("kind") or "Job", (resource.get("metadata") or {}).get("name")
            message = (f"{kind} {name} failed: trainctl's supervisor stopped on an internal error ({text}), a bug of "
                       f"trainctl's: supervisor.log in {self.dir.path} has the traceback, please report it")
            status = dict(cond.status_of(resource))
            stamp = rfc3339(datetime.now(timezone.utc))
            status["conditions"] = cond.set_condition(cond.conditions_of(resource), "Failed", "True",
                                                      f"{kind}SupervisorFailed", message, stamp)
            status.setdefault("completionTime", stamp)
            resource["status"] = status
            self.dir.write_job(resource)
        with contextlib.suppress(OSError):
            self.write_runtime(force=True)

    def note_trouble(self, trouble: Exception) -> None:
        """Say once in supervisor.log what keeps this pass from finishing; nothing else changes."""
        text = f"{type(trouble).__name__}: {trouble}"
        if text != self.last_trouble:
            self.last_trouble = text
            with contextlib.suppress(OSError):  # supervisor.log may sit on the very disk that is full
                print(f"{rfc3339(datetime.now(timezone.utc))} will retry: {text}", file=sys.stderr, flush=True)

    def contain(self) -> None:
        """Find what holds the replicas here, and record it where delete will look even if runtime.json is damaged."""
        uid = self.runtime.get("uid") or ""
        self.containment = containment.detect(uid)
        self.runtime["containment"] = self.containment.as_record()
        try:
            self.dir.record_containment(self.containment.as_record())
        except OSError as trouble:  # runtime.json, rewritten every second, still names it
            self.note_trouble(trouble)

    def _on_term(self, *_: object) -> None:
        self.stopping = True

    def step(self) -> tuple[float | None, bool]:
        polled = time.time()
        for replica in self.replicas.values():
            if replica.poll(self.last_poll):  # its process ended: what it left behind ends too, as with a container
                self.containment.end_replica(replica.replica_id)
        self.last_poll = polled
        with self.dir.locked():
            if not self.dir.exists():
                return None, False
            resource = self.dir.read_job()
            job = Job(resource)
            plan = reconcile(resource, [r.observed() for r in self.replicas.values()],
                             datetime.now(timezone.utc), self.network(resource),
                             unobserved_failures=self.unobserved_failures(job),
                             last_activity=self.last_activity() if job.stall_timeout else None)
            if plan.annotations is not None:  # the record first: a restart decided is never decided again
                metadata = resource["metadata"]
                metadata["annotations"] = {**(metadata.get("annotations") or {}), **plan.annotations}
                self.dir.write_job(resource)
            self.tell_stopping(plan.actions, resource)
            for action in plan.actions:
                if isinstance(action, DeleteJob):
                    self.stop_everything()
                    # the TTL after it finished ran out; its files first, so a job seen gone has none left
                    remove_function_files(resource)
                    self.dir.remove()
                    return None, True
                self.execute(action, resource)
            if plan.status != resource.get("status"):
                # the rows first: a reader that sees the new status (Failed) finds the exits it was derived from
                self.write_runtime()
                resource["status"] = plan.status
                self.dir.write_job(resource)
        self.write_runtime()
        finished = cond.finished(plan.status.get("conditions") or [])
        idle = not any(r.exit_code is None for r in self.replicas.values())
        return plan.requeue_after, finished and idle and plan.requeue_after is None

    def last_activity(self) -> datetime | None:
        """When a replica of this run last wrote to its log or progress file, or started (for the stall timeout)."""
        times = []
        for replica in self.replicas.values():
            times.append(replica.start_time)
            for path in (self.dir.log_file(replica.replica_id), self.dir.progress_file(replica.replica_id)):
                with contextlib.suppress(OSError):
                    times.append(path.lstat().st_mtime)  # a link's own: what it names is no output of the job's
        return datetime.fromtimestamp(max(times), timezone.utc) if times else None

    def unobserved_failures(self, job: Job) -> tuple[Run, ...]:
        """The failed runs of replicas no process is observed for, which the Failed condition may still have to
        name as the cause: the last runs of those waiting out their restart back-off, and the runs of those the
        job stopped before it failed (the core stops the rest first when only a consequence is seen)."""
        waiting = tuple(Run(job.replica_id(row["rtype"], row["index"]), row["last_exit_code"], row["last_reason"],
                            row["last_finished"], previous=True, exit_window=stored_window(row["last_exit_window"]),
                            message=row["last_message"])
                        for row in self.deleted.values() if row["state"] == CRASH_LOOP)
        stopped = tuple(Run(job.replica_id(row["rtype"], row["index"]), row["exit_code"], row["reason"],
                            row["finished"], exit_window=stored_window(row["exit_window"]), message=row["message"],
                            stopped=row["stopped"])
                        for row in self.deleted.values() if row["state"] == "Failed")
        return waiting + stopped

    # ---- actions -----------------------------------------------------------------------
    def execute(self, action: object, resource: dict) -> None:
        if isinstance(action, CreateReplica):
            self.create(action, resource)
        elif isinstance(action, DeleteReplica):
            self.delete(action)
        elif isinstance(action, RecordEvent):
            try:
                self.dir.append_event({"type": action.type, "reason": action.reason, "message": action.message,
                                       "time": rfc3339(datetime.now(timezone.utc))})
            except OSError as err:  # an event lost to a full disk must not hold back the plan's other actions
                self.note_trouble(err)

    def tell_stopping(self, actions: list, resource: dict) -> None:
        """Every running replica this plan stops hears it at once, as the pods of a suspended job do: its notice
        file (trainctl.preempting()) and SIGTERM; their grace periods run together, not one after another."""
        for action in actions:
            replica = self.replicas.get(action.name) if isinstance(action, DeleteReplica) else None
            if replica is None or replica.exit_code is not None or action.name in self.stop_by:
                continue
            with contextlib.suppress(OSError):
                write_notice(self.dir.preempting_file(replica.replica_id), f"{action.reason}\n")
            processes.terminate(replica.process)
            # the action's grace when it has one (a survivor of a node loss; no local replica has a node, so none
            # gets it today), else the pod template's
            grace = grace_seconds(resource, action.rtype) if action.grace_period is None else action.grace_period
            self.stop_by[action.name] = time.monotonic() + grace

    def create(self, action: CreateReplica, resource: dict) -> None:
        if time.monotonic() < self.not_before.get(action.name, 0.0):
            return  # still backing off; the core asks again on the next pass
        container = Job(resource).main_container(action.pod["spec"]["containers"]) or {}
        command = [*(container.get("command") or []), *(container.get("args") or [])]
        replica_id = Job(resource).replica_id(action.rtype, action.index)
        env = {**os.environ, **self.extra_env(action, resource), **action.env,
               processes.MARKER: resource["metadata"]["uid"]}
        env.update(self.report_env(replica_id, resource, env))
        env.pop(processes.SUPERVISOR_MARKER, None)
        remove_odd(self.dir.termination_file(replica_id))  # a message left by a run the supervisor lost
        remove_odd(self.dir.preempting_file(replica_id))  # the notice was the last run's
        workdir = self.runtime["workdir"]
        # The log cannot be opened (full disk): an OSError leaves this pass and the start is tried
        # again, rather than counting a failure of the machine against the replica. Whatever a replica put
        # in its place (a link to a file elsewhere, a FIFO) is replaced, never written through.
        with os.fdopen(open_own_file(self.dir.log_file(replica_id)), "ab") as log:
            try:
                argv, argv_env = self.containment.launch(command, env, workdir)
                process = processes.start(argv, argv_env, workdir, log, self.containment.joiner(replica_id))
            except START_ERRORS as err:  # the command itself cannot run: the replica failed
                problem = getattr(err, "strerror", None) or str(err) or type(err).__name__
                with contextlib.suppress(OSError):
                    log.write(f"trainctl: cannot start {repr(command)[:200]}: {problem}\n".encode(errors="replace"))
                process = None
        self.deleted.pop(action.name, None)
        self.replicas[action.name] = Replica(action, process, self.restarts.get(action.name, 0), replica_id,
                                             self.dir, self.last_runs.get(action.name))

    def extra_env(self, action: CreateReplica, resource: dict) -> dict[str, str]:
        """What a pod would get from its node and not from the operator: GPUs, a file for its termination
        message, its CPU share, what its kind needs of a machine (Framework.local_env), and where its checkpoints
        go and its notice of a stop comes (trainctl.checkpoints)."""
        job = Job(resource)
        replica_id = job.replica_id(action.rtype, action.index)
        env = {"TRAINCTL_PIP_CACHE": str(self.dir.path / "pip"),  # --pip installs per job (trainctl.code.pipwrap)
               TERMINATION_LOG_ENV: str(self.dir.termination_file(replica_id)),  # a pod's /dev/termination-log
               CHECKPOINT_DIR_ENV: local_directory(resource, str(self.dir.path)),  # trainctl.checkpoint_dir()
               PREEMPTING_ENV: str(self.dir.preempting_file(replica_id)),  # trainctl.preempting()
               **job.framework.local_env(job, action.rtype, action.index, str(self.dir.path))}
        gpus = self.runtime.get("gpus", {}).get(action.name, [])
        # Its slice, or "" to hide the machine's GPUs from a replica that asked for none; on a machine without
        # GPUs nothing, as a pod on a CPU-only node has no CUDA_VISIBLE_DEVICES: Paddle's launcher takes even
        # an empty one for a GPU machine, and its collective then fails (upstream's paddle simple-cpu example)
        if gpus or machine_has_gpus():
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        if "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = str(cpu_share(job.total_replicas))
        return env

    def report_env(self, replica_id: str, resource: dict, env: dict[str, str]) -> dict[str, str]:
        """What ``trainctl.report()`` needs (trainctl.reporting): the replica's own progress file (whatever a
        template said: the reports are read there), the job's stand-in package ``trainctl`` first on PYTHONPATH,
        for a replica whose Python has no trainctl, the job's name and its kind's launch facts."""
        launch = Job(resource).framework.function_launch.as_call()  # which of its processes reports
        variables = {reporting.ENV: str(self.dir.progress_file(replica_id)),
                     reporting.JOB_ENV: resource["metadata"]["name"],
                     reporting.LAUNCH_ENV: json.dumps(launch, separators=(",", ":"))}
        if self.dir.replica_lib.is_dir():  # a job created before trainctl shipped it has none
            path = env.get("PYTHONPATH")
            variables["PYTHONPATH"] = str(self.dir.replica_lib) + (os.pathsep + path if path else "")
        return variables

    def delete(self, action: DeleteReplica) -> None:
        replica = self.replicas.pop(action.name, None)
        if replica is None:
            return
        running = replica.exit_code is None
        stop_by = self.stop_by.pop(action.name, None)
        if running:
            grace = processes.GRACE_SECONDS if stop_by is None else max(0.0, stop_by - time.monotonic())
            processes.stop_group(replica.process, grace, terminate=stop_by is None)
            replica.poll(self.last_poll)
        self.containment.end_replica(replica.replica_id)
        # ended by the stop's signal, not by a failure of its own in the grace period
        stopped = running and replica.exit_code in STOP_EXIT_CODES
        if action.reason == "Restart":
            self.restarts[action.name] = replica.restarts + 1
            delay = min(RESTART_DELAY_SECONDS * 2 ** replica.restarts, RESTART_DELAY_MAX_SECONDS)
            self.not_before[action.name] = time.monotonic() + delay
            self.dir.rotate_logs(replica.replica_id)
            # until it runs again it shows as kubelet shows a pod waiting to restart, with the failed run's code
            self.last_runs[action.name] = replica.as_last_run()
            self.deleted[action.name] = {**replica.row(), **self.last_runs[action.name], "state": CRASH_LOOP,
                                         "exit_code": None, "reason": "", "message": "", "exit_window": None,
                                         "restarts": self.restarts[action.name]}
        else:
            self.deleted[action.name] = {**replica.row(), "state": "Deleted" if action.reason != "Cleanup"
                                         else replica.row()["state"], "stopped": stopped}

    def stop_everything(self) -> None:
        for replica in self.replicas.values():
            if replica.exit_code is None:
                processes.stop_group(replica.process)
        uid = self.runtime.get("uid")
        if uid:
            job_cgroup = self.containment.job_cgroup
            containment.stop_job(uid, [job_cgroup] if job_cgroup else [])

    # ---- network and runtime table ---------------------------------------------------------
    def network(self, resource: dict) -> LocalNetwork:
        job = Job(resource)
        ports = self.runtime.setdefault("ports", {})
        wanted = [f"{rtype}/{index}" for rtype in job.replica_types for index in range(job.replicas(rtype))]
        if job.framework.port is not None and any(key not in ports for key in wanted):
            self.allocate_ports(wanted)
        network = LocalNetwork({tuple_key(k): v for k, v in ports.items()}, files_dir=str(self.dir.path))
        for relative, text in job.framework.local_files(job, network).items():
            path = self.dir.path / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text(path, text)  # rewritten each pass: a replica reading it meanwhile sees it whole
        return network

    def allocate_ports(self, keys: list[str]) -> None:
        """Free ports no other local job holds, chosen under a lock shared by every supervisor.

        A port the kernel calls free may still be promised to a job whose replica has not
        bound it yet; the lock plus the other jobs' recorded ports rule that collision out.
        """
        with JobDir.locked_home("ports"):
            taken = all_recorded_ports(exclude=self.dir)
            ports = self.runtime["ports"]
            for key in keys:
                if key not in ports:
                    ports[key] = processes.free_port(avoid=taken)
                    taken.add(ports[key])
            self.dir.write_runtime(self.runtime)

    def write_runtime(self, force: bool = False) -> None:
        now = time.time()
        if not force and now - self.last_heartbeat < HEARTBEAT_SECONDS and not self._changed():
            return
        self.last_heartbeat = now
        self.index_logs(now)
        rows = {**self.deleted, **{name: r.row() for name, r in self.replicas.items()}}
        self.runtime.update(supervisor_pid=os.getpid(), heartbeat=now, replicas=rows)
        self.dir.write_runtime(self.runtime)

    def index_logs(self, now: float) -> None:
        """Note each growing log's size with the time, so ``logs --since`` knows where recent lines begin."""
        for replica in self.replicas.values():
            try:
                size = self.dir.log_file(replica.replica_id).lstat().st_size  # a link the replica left: not followed
            except FileNotFoundError:
                continue
            if size != replica.indexed_size:
                try:
                    append_line(self.dir.offsets_file(replica.replica_id), f"{now:.3f} {size}")
                except OSError as trouble:  # the index is a help to --since: losing an entry must not stop the job
                    self.note_trouble(trouble)
                    continue
                replica.indexed_size = size

    def _changed(self) -> bool:
        rows = {**self.deleted, **{name: r.row() for name, r in self.replicas.items()}}
        return json.dumps(rows, sort_keys=True) != json.dumps(self.runtime.get("replicas"), sort_keys=True)


def write_notice(path: Path, text: str) -> None:
    """Write ``path`` afresh (a replica's notice file), never through a link or into a FIFO left there."""
    with os.fdopen(open_own_file(path, os.O_WRONLY | os.O_TRUNC), "w") as notice:
        notice.write(text)


def tuple_key(key: str) -> tuple[str, int]:
    rtype, index = key.split("/")
    return rtype, int(index)


def main() -> int:
    try:
        supervisor = Supervisor(JobDir.at(Path(sys.argv[1])))
    except DamagedState as damage:  # started by resume on a job whose table was damaged meanwhile
        print(damage.message, file=sys.stderr)
        return 1
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())
