"""The Python API: what the CLI does, for notebooks and scripts.

    from trainctl import Client
    client = Client()                     # local, or Kubernetes when a kubeconfig exists
    job = client.run(train, args={"lr": 0.1}, workers=4)   # a JobHandle (trainctl.sdk.handle)
    job.wait(); job.result()
    client.submit(resource)               # a whole kubeflow.org/v1 resource, by name from then on

Every method raises :class:`trainctl.errors.UserError` (one line) for anything the
caller can fix.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from trainctl.backends.base import Backend, JobDetails, LogChunk, LogLine
from trainctl.core import conditions as cond
from trainctl.errors import InvalidArgument, UserError, option, setting

if TYPE_CHECKING:
    from trainctl.backends.reported import JobProgress, Point
    from trainctl.code.pods import CodeRequest
    from trainctl.sdk.failures import FailureSummary
    from trainctl.sdk.handle import JobHandle

BACKENDS = ("local", "kubernetes")  # the names trainctl.backends.load() knows
WAIT_CONDITIONS = ("Succeeded", "Failed", "Running", "Suspended")
WAIT_POLL_SECONDS = 0.2
LOG_READERS = 8  # failed runs' logs read at once for a failure summary
CHOSEN_BY_CALLER = ("asked for", "TRAINCTL_BACKEND")  # the reasons backend_choice gives for what it was told
DEFAULT_FRAMEWORK = "pytorch"  # run()'s when none is named, and finetune()'s: its recipe is a PyTorch DDP program


def choose_backend(backend: str | None, context: str | None, kubeconfig: str | None) -> str:
    """Explicit choice, then $TRAINCTL_BACKEND, then Kubernetes if a cluster is configured, else local."""
    return backend_choice(backend, context, kubeconfig)[0]


def backend_choice(backend: str | None, context: str | None, kubeconfig: str | None) -> tuple[str, str]:
    """:func:`choose_backend`'s choice and why it was made (``no kubeconfig found``)."""
    if backend:
        return checked_backend(backend, context, kubeconfig), CHOSEN_BY_CALLER[0]
    if os.environ.get("TRAINCTL_BACKEND"):
        return checked_backend(os.environ["TRAINCTL_BACKEND"], context, kubeconfig), CHOSEN_BY_CALLER[1]
    if context or kubeconfig:
        return "kubernetes", f"{option('context') if context else option('kubeconfig')} given"
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes", "running in a pod"
    configured = [Path(p) for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    configured.append(Path.home() / ".kube" / "config")
    found = next((path for path in configured if path.is_file()), None)
    return ("kubernetes", f"kubeconfig {found}") if found else ("local", "no kubeconfig found")


def checked_backend(choice: str, context: str | None, kubeconfig: str | None) -> str:
    if choice not in BACKENDS:
        raise UserError(f"backend {choice!r} (TRAINCTL_BACKEND or Client(backend=...)): "
                        f"use one of {', '.join(BACKENDS)}")
    if choice == "local" and (context or kubeconfig):
        raise UserError(f"{setting('backend', 'local')} cannot be combined with {option('context')} or "
                        f"{option('kubeconfig')}: pick one")
    return choice


class Client:
    def __init__(self, backend: str | None = None, *, context: str | None = None,
                 kubeconfig: str | None = None) -> None:
        """``backend``: "local" or "kubernetes"; left out, Kubernetes when a cluster is configured (a kubeconfig,
        ``context``, inside a pod), else local, and the choice is said on stderr: a notebook should not
        guess where its jobs run."""
        self.backend_name, self.chosen_because = backend_choice(backend, context, kubeconfig)
        self.context, self.kubeconfig = context, kubeconfig
        if self.chosen_because not in CHOSEN_BY_CALLER:
            where = "on this machine (the local backend)" if self.backend_name == "local" else "on Kubernetes"
            print(f"trainctl: Client() runs jobs {where}: {self.chosen_because}", file=sys.stderr)

    def __repr__(self) -> str:
        return f"<trainctl Client: {self.backend_name} backend ({self.chosen_because})>"

    @cached_property
    def backend(self) -> Backend:
        """The chosen backend, loaded on first use (the Kubernetes client is heavy)."""
        from trainctl.backends import load

        if self.backend_name == "local":
            return load("local")
        return load("kubernetes", context=self.context, kubeconfig=self.kubeconfig)

    def default_namespace(self) -> str:
        return self.backend.default_namespace()

    def _ns(self, namespace: str | None) -> str:
        from trainctl.kube.names import check_namespace

        return check_namespace(self.default_namespace() if namespace is None else namespace, option("namespace"))

    def submit(self, resource: dict, *, replace: bool = False, preflight: bool = True,
               code: CodeRequest | None = None, dry_run: bool = False, runtime: dict | None = None) -> dict:
        """Create the job. ``preflight=False`` skips the checks that it can run at all (locally: that its
        executable and script exist; on a cluster: that its CRD and namespace do), for when you know better.
        ``code``: what :func:`trainctl.submit.code_plan.request` decided travels, the resource rendered with it.
        ``dry_run``: make every check the create would (on a cluster the API server's too), create nothing.
        ``runtime``: a TrainJob's runtime, given beside it (``apply -f``), that it runs on. A runtime snapshot the
        TrainJob carries is never used (a warning says so): trainctl takes it from the runtime it resolves."""
        import copy
        import warnings

        from trainctl.core.trainjob import ignored_snapshot, with_runtime_snapshot, without_snapshot
        from trainctl.core.validation import validate

        if without_snapshot(resource):
            warnings.warn(ignored_snapshot(resource), stacklevel=2)
        validate(resource)
        if runtime is not None:
            with_runtime_snapshot(resource, copy.deepcopy(runtime))
        metadata = resource["metadata"]
        metadata["namespace"] = self._ns(metadata.get("namespace"))
        return self.backend.create(resource, replace=replace, preflight=preflight,
                                   snapshot=code.snapshot if code else None, dry_run=dry_run)

    def get(self, name: str, namespace: str | None = None, kind: str | None = None) -> JobDetails:
        return self.backend.get(name, self._ns(namespace), kind)

    def list(self, namespace: str | None = None, all_namespaces: bool = False,
             selector: str | None = None) -> list[dict]:
        checked_selector(selector)
        return self.backend.list(None if all_namespaces else self._ns(namespace), selector)

    def logs(self, name: str, namespace: str | None = None, *, replica: str | None = None, follow: bool = False,
             tail: int | None = None, since_seconds: int | None = None, previous: bool = False) -> Iterator[LogLine]:
        """Every replica's lines (``replica``: ``worker-1`` or the pod name ``mnist-worker-1``), each with
        the time it was written by; merged in time order, or with ``follow`` as they come until the job ends."""
        return self.backend.logs(name, self._ns(namespace), replica=replica, follow=follow, tail=tail,
                                 since_seconds=since_seconds, previous=previous)

    def log_chunks(self, name: str, namespace: str | None = None, *, replica: str | None = None,
                   follow: bool = False, tail: int | None = None, since_seconds: int | None = None,
                   previous: bool = False, timestamps: bool = False) -> Iterator[LogChunk]:
        """The same as :meth:`logs` as bytes in chunks of whole lines (what ``trainctl logs`` prints, fast)."""
        return self.backend.log_chunks(name, self._ns(namespace), replica=replica, follow=follow, tail=tail,
                                       since_seconds=since_seconds, previous=previous, timestamps=timestamps)

    def wait(self, name: str, namespace: str | None = None, *, until: str = "Succeeded",
             timeout: float | None = None, on_progress: Callable[[dict], None] | None = None,
             raise_on_failure: bool = False) -> dict:
        """Poll until condition ``until`` is True or the job ends otherwise; returns the job.

        ``until`` is a condition type in any case, also as kubectl spells it (``condition=Running``).
        Raises TimeoutError when ``timeout`` seconds pass first, and with ``raise_on_failure``
        :class:`~trainctl.errors.JobFailed` (carrying :meth:`failure_summary`) when the job failed
        although ``until`` was not Failed.
        """
        until = condition_type(until)
        resource = self._poll(name, namespace, until, timeout, on_progress)
        if raise_on_failure and until != "Failed" and cond.state_of(resource) == "Failed":
            from trainctl.errors import JobFailed

            raise JobFailed(self.failure_summary(name, namespace))
        return resource

    def _poll(self, name: str, namespace: str | None, until: str, timeout: float | None,
              on_progress: Callable[[dict], None] | None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:  # the job alone (on a cluster one GET, not three, five times a second)
            resource = self.backend.resource(name, self._ns(namespace))
            if on_progress:
                on_progress(resource)
            if cond.reached(resource, until) or cond.has_finished(resource):
                return resource
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {name} did not reach {until} within {timeout:g}s (now {cond.state_of(resource)})")
            time.sleep(WAIT_POLL_SECONDS)

    def failure_summary(self, name: str, namespace: str | None = None, *,
                        details: JobDetails | None = None) -> FailureSummary | None:
        """Why the job failed, or which replicas failed although it succeeded; None when nothing failed.

        It names the replica whose failure caused the others' (trainctl/sdk/failures.py: by its exception
        and the time it raised, not by who exited first), how it ended, and ends with the last lines of
        that run's log (the previous run's when the replica was restarted since). ``details``: what
        :meth:`get` just returned, so it is not read again.
        """
        from concurrent.futures import ThreadPoolExecutor

        from trainctl.sdk import failures

        def read_log(run: failures.FailedRun) -> list[str]:
            try:
                return [line.text for line in self.logs(name, namespace, replica=run.replica, previous=run.previous,
                                                        tail=failures.EVIDENCE_LINES)]
            except UserError:  # the job or the pod went away meanwhile: no log to judge by
                return []

        def read_logs(runs: list[failures.FailedRun]) -> list[list[str]]:
            # every failed run's log is evidence; on a cluster each is a request, so they are read side by side
            with ThreadPoolExecutor(max_workers=LOG_READERS) as pool:
                return list(pool.map(read_log, runs))

        return failures.summarize(details or self.get(name, namespace), read_logs)

    def progress(self, name: str, namespace: str | None = None, *,
                 details: JobDetails | None = None) -> JobProgress:
        """How far the job got by what its replicas reported with ``trainctl.report()``: its leading replica's
        step, total, rate, ETA and latest metrics, every replica's, and whether it stalled (trainctl.backends.reported).
        ``details``: what :meth:`get` just returned, so it is not read again."""
        from trainctl.backends.reported import job_progress

        return job_progress(self.backend, details or self.get(name, namespace))

    def metrics(self, name: str, namespace: str | None = None, *, replica: str | None = None) -> list[Point]:
        """Every point a replica reported with metrics (time, step, total, metrics), oldest first, at most
        trainctl.backends.reported.MAX_POINTS (evenly thinned past that). ``replica``: ``worker-1``; by default the
        first, in replica order (Master before Workers), whose reports hold metrics."""
        from trainctl.backends.base import pick_replica
        from trainctl.backends.reported import in_replica_order, metrics

        details = self.get(name, namespace)
        found = in_replica_order(details.resource, self.backend.reports(name, self._ns(namespace), whole=True))
        if replica is not None:
            chosen = pick_replica(replica, name, [reports.replica for reports in found])
            return metrics(next(reports for reports in found if reports.replica == chosen))
        return next((series for series in map(metrics, found) if series), [])

    def export(self, name: str, directory: str | os.PathLike, namespace: str | None = None) -> Path:
        """Write the job's logs (every replica's, and its run before), result, metrics, events and resource as
        files into ``directory`` (created; an existing one must be empty), whole or not at all; its path.
        trainctl/sdk/export.py lists the files."""
        from trainctl.sdk.export import export

        return export(self, name, self._ns(namespace), directory)

    def delete(self, name: str, namespace: str | None = None) -> None:
        self.backend.delete(name, self._ns(namespace))

    def suspend(self, name: str, namespace: str | None = None) -> dict:
        return self.backend.set_suspended(name, self._ns(namespace), True)

    def resume(self, name: str, namespace: str | None = None) -> dict:
        return self.backend.set_suspended(name, self._ns(namespace), False)

    # ---- the data scientist's API: jobs as handles ----------------------------------------------
    def run(self, target: Callable | list[str], *, framework: str = DEFAULT_FRAMEWORK, workers: int | None = None,
            gpus: int | None = None, args: dict | None = None, packages: list[str] | None = None,
            env: dict | list[str] | None = None, name: str | None = None, namespace: str | None = None,
            replace: bool = False, preflight: bool = True, dry_run: bool = False, pickle_result: bool = False,
            **submit_options) -> JobHandle | dict:
        """Run a function (``train(**args)`` in every replica) or a command list as a job; returns its handle
        (with ``dry_run``: the resource it would create, creating nothing, after every check the create makes).

        ``framework``: pytorch, tensorflow, xgboost, mpi, paddle or jax. Every other keyword is the
        ``trainctl submit`` option of that name (``backoff_limit=0`` is ``--backoff-limit 0``) with its
        meaning and checks; anything unknown or bad raises :class:`~trainctl.errors.InvalidArgument`
        before anything is created. docs/python-api.md says what of a function travels. ``pickle_result``:
        rank 0 returns any picklable value, read back with ``result(allow_pickle=True)``, instead of data only.
        """
        from trainctl.sdk.running import run

        keywords = {"workers": workers, "gpus": gpus, "env": env, "name": name, "namespace": namespace,
                    **submit_options}
        return run(self, target, framework=framework, args=args, packages=packages, replace=replace,
                   preflight=preflight, dry_run=dry_run, keywords=keywords, pickle_result=pickle_result)

    def finetune(self, model: str, dataset: str, *, workers: int | None = None, output_dir: str = "finetune-output",
                 text_column: str = "text", lora: dict | None = None, training_args: dict | None = None,
                 max_length: int = 512, merge: bool = False, deepspeed: str | None = None, resume: str = "auto",
                 recipe: str | None = None, **run_keywords) -> JobHandle | dict:
        """Fine-tune a causal language model with LoRA as a PyTorchJob of ``workers`` replicas (DDP); its handle.

        ``model``/``dataset``: paths (a save_pretrained directory; a .jsonl/.json/.csv/.parquet/.txt file or
        a save_to_disk directory) or Hub ids. ``lora``: LoraConfig fields; ``training_args``:
        TrainingArguments fields (max_steps, save_steps, learning_rate ...). Checkpoints, the adapter
        (``<output_dir>/adapter``) and with ``merge`` the merged model go to ``output_dir``; a restarted
        job resumes from its last checkpoint. ``resume``: what to do with another run's checkpoints in
        ``output_dir`` (another job, or other arguments): ``"auto"`` refuses them before anything is created,
        ``"never"`` starts over (deleting them), a checkpoint's path continues from it. Every other keyword
        is :meth:`run`'s (gpus, volume, packages, env, name ...). ``recipe``: your own copy of the recipe.
        docs/finetuning.md walks through it.
        """
        from trainctl.sdk.finetuning import finetune

        return finetune(self, model, dataset, output_dir=output_dir, text_column=text_column, lora=lora,
                        training_args=training_args, max_length=max_length, merge=merge, deepspeed=deepspeed,
                        resume=resume, recipe=recipe, framework=DEFAULT_FRAMEWORK,
                        run_keywords={"workers": workers, **run_keywords})

    def job(self, name: str, namespace: str | None = None) -> JobHandle:
        """The handle of an existing job (NotFound if there is none by that name)."""
        from trainctl.sdk.handle import JobHandle

        resource = self.get(name, namespace).resource
        return JobHandle(self, name, resource["metadata"]["namespace"], resource["kind"])

    def jobs(self, namespace: str | None = None, all_namespaces: bool = False,
             selector: str | None = None) -> list[JobHandle]:
        """A handle per job (in the namespace, or all), optionally only those matching a label ``selector``;
        in a notebook the list shows as the table ``trainctl list`` prints."""
        from trainctl.sdk.display import Jobs
        from trainctl.sdk.handle import JobHandle

        resources = self.list(namespace, all_namespaces, selector)
        return Jobs(self, [JobHandle(self, r["metadata"]["name"], r["metadata"]["namespace"], r["kind"])
                           for r in resources], resources)


def checked_selector(selector: object) -> None:
    """A label selector as the Python keyword names it: a string that parses, else one InvalidArgument line."""
    from trainctl.kube import selectors

    if selector is not None and not isinstance(selector, str):
        raise InvalidArgument(f"selector={selector!r}: give a label selector string, e.g. selector='team=vision'")
    try:
        selectors.parse(selector)
    except UserError as error:
        raise InvalidArgument(error.message) from None


def condition_type(text: str) -> str:
    """``running``, ``Running`` or ``condition=Running`` -> ``Running``; anything else is a UserError."""
    wanted = text.strip()
    if wanted.lower().startswith("condition="):
        wanted = wanted[len("condition="):]
    for ctype in WAIT_CONDITIONS:
        if ctype.lower() == wanted.lower():
            return ctype
    raise UserError(f"{option('until')} {text!r}: use one of {', '.join(WAIT_CONDITIONS)} "
                    "(any case, or condition=NAME)")
