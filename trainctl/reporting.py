"""``trainctl.report(step=..., total=..., **metrics)``: a replica says how far it got, cheaply, wherever it runs.

    import trainctl

    for step in range(1, steps + 1):
        loss = train_one_step()
        trainctl.report(step=step, total=steps, loss=loss)

This module runs inside the replicas, so it imports nothing but the standard library (MLflow only
when it is there and asked for) and travels with every job: trainctl puts it, under a stand-in
package ``trainctl`` (trainctl/code/replica_package.py), on the replicas' PYTHONPATH, so
``import trainctl`` works in an image that has no trainctl; where trainctl is installed the
stand-in gives way to it. Outside a job (no :data:`ENV`) :func:`report` does nothing, so a
script that reports runs anywhere.

**The channel.** A job's runtime names where reports go in :data:`ENV`: locally a file of the job's
state directory per replica, in a pod ``/dev/stdout`` (the container's log, the one thing a pod can
hand out without any permission on the API server). Each write is one line, at most
:data:`MAX_LINE_BYTES` (one ``write``, so it never interleaves with other output on a pipe)::

    trainctl-progress:v1 [[time, step, total, {"loss": 0.25, ...}], ...]

a JSON list of points: Unix time, step (an int or null), total steps (an int or null) and the
metrics, numbers by name (NaN and infinities as JSON's ``NaN``/``Infinity``). :func:`points_of`
reads a line back: whatever a replica wrote is data, never code, and every field is checked and
bounded, so a garbled or hostile line costs one skipped point, nothing more.

**The cost.** :func:`report` only appends the point to a list (about a microsecond); a daemon
thread writes: the first point at once, then whatever came in at most once every
:data:`FLUSH_SECONDS`, and the rest at exit. A failed write (a full disk, a closed pipe) drops
points; :func:`report` never raises and never waits for I/O. What is kept is bounded too: every
point with metrics until :data:`MAX_SERIES` were kept, then every 2nd, after as many again every
4th, and so on, so a run reporting every step for days writes a series of some 100,000 points,
not of millions; a point with no metrics (``report(step=i)``) only moves the progress on, and the
last point of each write is kept whatever it is, so progress is never more than a second old.

**Who reports.** One process per replica: a replica's local rank 0 (torchrun's ``LOCAL_RANK``);
under mpirun only world rank 0, whose output is the launcher's. The job's rank 0 also logs its
points to MLflow when ``MLFLOW_TRACKING_URI`` is set and mlflow imports (:class:`MLflowLog`). Which
variables say so is the job kind's fact, not this module's: trainctl hands it over in
:data:`LAUNCH_ENV` (the framework's launch facts as JSON: trainctl.frameworks.base.FunctionLaunch),
which both runtimes set beside :data:`ENV`. Without it every process reports, as its replica's and
the job's first.

**Frameworks' loops.** :func:`transformers_callback` (for a Hugging Face ``Trainer``) and
:func:`lightning_callback` (PyTorch Lightning) report for you; trainctl's fine-tuning recipe uses
the first. docs/progress.md walks through it all.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import sys
import threading
import time

ENV = "TRAINCTL_PROGRESS"  # where this replica's reports go: a file path (locally), /dev/stdout in a pod
JOB_ENV = "TRAINCTL_JOB"  # the job's name, set by trainctl: MLflow's run name
MARKER = "trainctl-progress:v1"
FLUSH_SECONDS = 1.0
MAX_SERIES = 10_000  # points with metrics kept at full rate; then at half rate for as many again, ...
MAX_LINE_BYTES = 4000  # under PIPE_BUF (4096): one atomic write on a pipe
MAX_METRICS = 32  # per point; more are dropped, with a warning
MAX_NAME_CHARS = 64
LAUNCH_ENV = "TRAINCTL_LAUNCH"  # the job kind's launch facts, JSON: which variables number its processes


def report(step: int | None = None, total: int | None = None, **metrics: float) -> None:
    """Record how far this replica got: ``step`` of ``total`` (ints), and metrics as numbers (floats, ints,
    numpy or 0-d torch values). Cheap (a few microseconds), never raises, never waits for I/O; outside a
    trainctl job, nothing. A value that is no number is left out, with one warning on stderr per name."""
    try:
        writer = _writer_of_this_process()
        if writer is not None:
            writer.add(checked_count(step, "step"), checked_count(total, "total", minimum=1), checked_metrics(metrics))
    except Exception as error:  # noqa: BLE001 - reporting must never end a training run
        warn_once("error", f"trainctl.report failed and is ignored: {type(error).__name__}: {error}")


# ---- the points: what a report holds, and how a line is read back -------------------------------

def checked_count(value: object, what: str, minimum: int = 0) -> int | None:
    """``value`` as a whole number >= ``minimum`` (an int, an integral float, a numpy or torch integer); None,
    said once, for anything else."""
    if value is None:
        return None
    try:
        count = int(value)
        exact = count == value and not isinstance(value, bool)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        exact = False
    if not exact or count < minimum:
        warn_once(what, f"trainctl.report: {what}={str(value)[:60]!r} is left out: give a whole number >= {minimum}")
        return None
    return count


def checked_metrics(metrics: dict) -> dict[str, float]:
    """The metrics as floats by name; what is no number (or past :data:`MAX_METRICS`) is left out, said once."""
    numbers = {}
    for name, value in metrics.items():
        try:
            number = float(value) if not isinstance(value, (str, bytes)) else None
        except (TypeError, ValueError, RuntimeError):  # RuntimeError: a torch tensor of more than one value
            number = None
        if number is None:
            warn_once(f"metric {name}", f"trainctl.report: {name}={str(value)[:60]!r} is left out: not a number")
        elif len(numbers) >= MAX_METRICS or len(name) > MAX_NAME_CHARS:
            warn_once("too many", f"trainctl.report: at most {MAX_METRICS} metrics of at most {MAX_NAME_CHARS} "
                                  f"characters each; {name[:MAX_NAME_CHARS]!r} and any more are left out")
        else:
            numbers[name] = number
    return numbers


def points_of(line: str) -> list[tuple[float, int | None, int | None, dict[str, float]]]:
    """The points of one channel line (its text, from :data:`MARKER` on); [] for anything else. A point that is
    not exactly what :func:`report` writes is skipped: the line is untrusted data."""
    start = line.find(MARKER)  # anywhere: output that did not end its line may come first
    if start < 0 or len(line) - start > 4 * MAX_LINE_BYTES:  # longer than any line report() writes
        return []
    try:
        data = json.loads(line[start + len(MARKER):])
    except (ValueError, RecursionError):
        return []
    return [point for point in map(valid_point, data if type(data) is list else []) if point is not None]


def valid_point(data: object) -> tuple[float, int | None, int | None, dict[str, float]] | None:
    if type(data) is not list or len(data) != 4:
        return None
    moment, step, total, metrics = data
    if type(moment) not in (int, float) or not math.isfinite(moment):
        return None
    if not all(count is None or (type(count) is int and count >= 0) for count in (step, total)):
        return None
    if type(metrics) is not dict or len(metrics) > MAX_METRICS:
        return None
    if not all(len(name) <= MAX_NAME_CHARS and type(value) in (int, float) for name, value in metrics.items()):
        return None
    return float(moment), step, total, {name: float(value) for name, value in metrics.items()}


_encode = json.JSONEncoder(separators=(",", ":")).encode  # one encoder: json.dumps(..., separators) makes one a call
LINE_POINTS = 32  # encoded together: one call per line, not per point


def encoded_lines(points: list[tuple]) -> list[bytes]:
    """The points (time to the millisecond) as channel lines of at most :data:`MAX_LINE_BYTES` each (newline
    included), :data:`LINE_POINTS` a line, fewer where they are long; a point longer than a line by itself
    (32 metrics of 64-character names, say) gets a line of its own."""
    lines = []
    for start in range(0, len(points), LINE_POINTS):
        lines += fitted(points[start:start + LINE_POINTS])
    return lines


def fitted(points: list[tuple]) -> list[bytes]:
    line = f"{MARKER} {_encode(points)}\n".encode()
    if len(line) <= MAX_LINE_BYTES or len(points) == 1:
        return [line]
    half = len(points) // 2
    return fitted(points[:half]) + fitted(points[half:])


# ---- who reports, and the writer -----------------------------------------------------------------

def launch_facts(env: os._Environ | dict) -> dict:
    """The job kind's launch facts from :data:`LAUNCH_ENV`; {} when there are none (or they are garbled)."""
    try:
        facts = json.loads(env.get(LAUNCH_ENV) or "{}")
    except ValueError:
        return {}
    return facts if isinstance(facts, dict) else {}


def names(facts: dict, key: str) -> list[str]:
    value = facts.get(key)
    return [name for name in value if isinstance(name, str)] if isinstance(value, list) else []


def leads_its_replica(env: os._Environ | dict) -> bool:
    """The one process of a replica that reports: where each of its kind's replica ranks (torchrun's local rank,
    mpirun's world rank) is 0 or unset."""
    return all(env.get(name, "0") == "0" for name in names(launch_facts(env), "replica_ranks"))


def leads_the_job(env: os._Environ | dict) -> bool:
    """Whether this process is the job's rank 0, by the rank its kind's launcher set, or by its cluster spec (the
    first leader task the cluster has, else worker 0); a process with none of them (one replica) is."""
    facts = launch_facts(env)
    rank = next((env[name] for name in names(facts, "rank_variables") if name in env), None)
    if rank is not None:
        return rank == "0"
    spec = facts.get("cluster_spec")
    try:
        config = json.loads(env.get(spec) or "{}") if isinstance(spec, str) else {}
        task, cluster = config.get("task") or {}, config.get("cluster") or {}
    except (ValueError, AttributeError):
        return False
    if not task:
        return True
    leader = next((role for role in names(facts, "leader_tasks") if cluster.get(role)), "worker")
    return task.get("type") == leader and str(task.get("index", 0)) == "0"


class Writer:
    """One process's reports: :meth:`add` keeps the point; a daemon thread writes the lines (see the module's
    docstring for when, and what is kept)."""

    def __init__(self, path: str, mlflow: MLflowLog | None) -> None:
        self.path, self.mlflow = path, mlflow
        self.lock, self.writing = threading.Lock(), threading.Lock()
        self.pending: list[tuple] = []  # kept points not written yet
        self.latest: tuple | None = None  # the last point reported, kept or not
        self.latest_written = True
        self.offered = self.kept = 0  # points with metrics reported, and kept for the series
        self.due = threading.Event()
        self.descriptor: int | None = None
        threading.Thread(target=self.run, name="trainctl-report", daemon=True).start()

    def add(self, step: int | None, total: int | None, metrics: dict[str, float]) -> None:
        point = (round(time.time(), 3), step, total, metrics)
        with self.lock:
            self.latest, self.latest_written = point, False
            if metrics:
                stride = 2 ** (self.kept // MAX_SERIES)
                self.offered += 1
                if (self.offered - 1) % stride == 0:
                    self.kept += 1
                    self.pending.append(point)
                    self.latest_written = True
        if step is not None and total is not None and step >= total:
            self.flush()  # the last step, now: the job may stop this replica as soon as another one is done
        elif not self.due.is_set():
            self.due.set()

    def run(self) -> None:
        while True:
            self.due.wait()
            self.due.clear()
            self.flush()
            time.sleep(FLUSH_SECONDS)

    def flush(self) -> None:
        """Write what was reported since the last write; a failure drops it (training goes on)."""
        with self.writing:
            with self.lock:
                points, self.pending = self.pending, []
                if not self.latest_written and self.latest is not None:
                    points.append(self.latest)
                    self.latest_written = True
            if not points:
                return
            try:
                if self.descriptor is None:
                    self.descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                for line in encoded_lines(points):
                    os.write(self.descriptor, line)
            except OSError as error:
                warn_once("write", f"trainctl.report: cannot write to {self.path} ({error.strerror}): reports "
                                   "are dropped")
            if self.mlflow is not None:
                self.mlflow.log([point for point in points if point[3]])

    def close(self) -> None:
        self.flush()
        if self.mlflow is not None:
            self.mlflow.finish()


class MLflowLog:
    """Rank 0's points in an MLflow run: ``MLFLOW_RUN_ID``'s if set, else a new one named after the job (in
    ``MLFLOW_EXPERIMENT_ID``'s or ``MLFLOW_EXPERIMENT_NAME``'s experiment, else the default), ended with the
    process. The run is made at the first report, in the caller's thread (importing mlflow takes about a
    second, once: made any later, at exit, mlflow's import could no longer start the threads it needs);
    the points are then logged from the writer's thread. Its first error ends the logging, said once."""

    def __init__(self) -> None:
        self.client = self.run_id = None
        self.count = 0  # steps for points that have none
        self.failed = False
        try:
            self.start()
        except Exception as error:  # noqa: BLE001 - MLflow's errors are many; none may stop the training
            self.stop(error)

    def stop(self, error: Exception) -> None:
        self.failed = True
        warn_once("mlflow", f"trainctl.report: logging to MLflow stopped: {type(error).__name__}: {error}")

    def log(self, points: list[tuple]) -> None:
        if self.failed or not points:
            return
        try:
            from mlflow.entities import Metric

            metrics = []
            for moment, step, _total, values in points:
                self.count += 1
                metrics += [Metric(name, value, int(moment * 1000), self.count if step is None else step)
                            for name, value in values.items()]
            self.client.log_batch(self.run_id, metrics=metrics)
        except Exception as error:  # noqa: BLE001
            self.stop(error)

    def start(self) -> None:
        """The run, through MLflow's client only: the user's own ``mlflow.start_run()`` stays free to run."""
        import mlflow
        from mlflow.entities import Metric  # noqa: F401 - imported now, for the writer's thread at exit

        self.client = mlflow.MlflowClient()
        self.run_id = os.environ.get("MLFLOW_RUN_ID") or self.client.create_run(
            self.experiment_id(), run_name=os.environ.get(JOB_ENV)).info.run_id

    def experiment_id(self) -> str:
        """``MLFLOW_EXPERIMENT_ID``, else ``MLFLOW_EXPERIMENT_NAME``'s (made if missing), else the default, "0"."""
        if os.environ.get("MLFLOW_EXPERIMENT_ID"):
            return os.environ["MLFLOW_EXPERIMENT_ID"]
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
        if not name:
            return "0"
        found = self.client.get_experiment_by_name(name)
        return found.experiment_id if found else self.client.create_experiment(name)

    def finish(self) -> None:
        if self.client is not None and not self.failed and "MLFLOW_RUN_ID" not in os.environ:
            try:
                self.client.set_terminated(self.run_id)
            except Exception:  # noqa: BLE001 - at exit, nothing is left to tell
                pass


_writer: Writer | None = None
_writer_pid: int | None = None  # the process that made it: a forked child makes its own
_started = threading.Lock()


def _writer_of_this_process() -> Writer | None:
    global _writer, _writer_pid
    if _writer_pid == os.getpid():
        return _writer
    with _started:
        if _writer_pid != os.getpid():
            _writer, _writer_pid = _new_writer(), os.getpid()
    return _writer


def _new_writer() -> Writer | None:
    path = os.environ.get(ENV)
    if not path or not leads_its_replica(os.environ):
        return None
    mlflow = MLflowLog() if os.environ.get("MLFLOW_TRACKING_URI") and leads_the_job(os.environ) else None
    writer = Writer(path, mlflow)
    atexit.register(writer.close)
    return writer


_warned: set[str] = set()


def warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        try:
            print(message, file=sys.stderr, flush=True)
        except (OSError, ValueError):  # stderr closed: nothing to tell it with
            pass


# ---- the frameworks' training loops ------------------------------------------------------------------

def transformers_callback():
    """A Hugging Face ``TrainerCallback`` that reports every step (``global_step`` of ``max_steps``) and each
    logged loss, learning rate, grad norm ...: ``Trainer(..., callbacks=[trainctl.reporting.transformers_callback()])``."""
    from transformers import TrainerCallback

    class ReportToTrainctl(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            report(step=state.global_step, total=state.max_steps or None)

        def on_log(self, args, state, control, logs=None, **kwargs):
            numbers = {name: value for name, value in (logs or {}).items()
                       if isinstance(value, (int, float)) and not isinstance(value, bool)}
            if numbers:
                report(step=state.global_step, total=state.max_steps or None, **numbers)

    return ReportToTrainctl()


def lightning_callback():
    """A PyTorch Lightning ``Callback`` that reports every training batch (``global_step`` of the
    estimated stepping batches) with the logged metrics: ``Trainer(callbacks=[trainctl.reporting.lightning_callback()])``."""
    try:
        from lightning.pytorch import Callback
    except ImportError:
        from pytorch_lightning import Callback

    class ReportToTrainctl(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            total = trainer.estimated_stepping_batches
            numbers = {}
            for name, value in trainer.callback_metrics.items():
                try:
                    numbers[name] = float(value)
                except (TypeError, ValueError, RuntimeError):
                    continue
            report(step=trainer.global_step,
                   total=int(total) if isinstance(total, (int, float)) and math.isfinite(total) else None, **numbers)

    return ReportToTrainctl()
