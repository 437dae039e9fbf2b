"""The Kubeflow Training SDK v1's ``TrainingClient`` job methods, over trainctl, so an upstream notebook
runs unchanged but for one import, locally or on a cluster:

    from kubeflow.training import TrainingClient   ->   from trainctl.compat import TrainingClient

Why a class rather than upstream's parameter names as aliases on ``Client.run``: the calls mean
different things, not just differently spelled ones. Upstream calls ``train_func(parameters)`` with
one positional dict where ``run`` calls ``func(**args)``; ``get_job_logs`` returns ``({pod: text},
{events})``, ``wait_for_job_conditions`` waits for a set of conditions and raises RuntimeError,
``create_job`` returns nothing. Aliases would give ``run`` two names per concept and still not make
an upstream notebook run; this class keeps ``run`` small and speaks upstream's dialect whole.

Covered: ``create_job`` with ``name`` and ``train_func`` for PyTorchJob and TFJob (as upstream), or a
``job`` given as a dict of any kind; ``get_job``, ``get_job_logs``, ``wait_for_job_conditions``,
``delete_job``. Upstream parameters mapped onto ``run``'s keywords: ``num_workers`` -> workers,
``num_procs_per_worker`` -> nproc_per_node (torchrun, as upstream), ``resources_per_worker`` cpu/memory/gpu
-> cpu/memory/gpus, ``base_image`` -> image, ``env_vars``, ``labels``, ``annotations``,
``num_chief_replicas``/``num_ps_replicas`` -> chief/ps, ``queue_name`` -> the Kueue queue label, as
upstream. ``packages_to_install`` goes to ``run``'s packages. Kubernetes objects
(V1ResourceRequirements, V1Volume ...) are refused with what to pass instead: trainctl does not import
the Kubernetes client for a notebook.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable

from trainctl.api import Client, conditions_of
from trainctl.errors import InvalidArgument, JobFailed
from trainctl.job import KUEUE_QUEUE_LABEL
from trainctl.running import checked
from trainctl.validation import validate

FUNCTION_KINDS = ("PyTorchJob", "TFJob")  # the kinds upstream builds from a function or an image
JOB_CONDITIONS = ("Created", "Running", "Restarting", "Succeeded", "Failed", "Suspended")
UPSTREAM_PIP_INDEX = "https://pypi.org/simple"


class FailedJob(JobFailed, RuntimeError):
    """Upstream raises RuntimeError for a failed job; this one also carries trainctl's failure summary."""


class TrainingClient:
    def __init__(self, config_file: str | None = None, context: str | None = None, client_configuration=None,
                 namespace: str | None = None, job_kind: str = "PyTorchJob", backend: str | None = None) -> None:
        if client_configuration is not None:
            raise InvalidArgument("client_configuration: pass config_file= (a kubeconfig) or context= instead")
        self.client = Client(backend, context=context, kubeconfig=config_file)
        self.namespace, self.job_kind = namespace, job_kind

    def create_job(self, job: dict | None = None, name: str | None = None, namespace: str | None = None,
                   labels: dict | None = None, annotations: dict | None = None, job_kind: str | None = None,
                   base_image: str | None = None, train_func: Callable | None = None, parameters: dict | None = None,
                   num_workers: int | None = 1, num_procs_per_worker: int | str | None = None,
                   resources_per_worker: dict | None = None, num_chief_replicas: int | None = None,
                   num_ps_replicas: int | None = None, packages_to_install: list[str] | None = None,
                   pip_index_url: str = UPSTREAM_PIP_INDEX, env_vars: dict | list | None = None,
                   queue_name: str | None = None, volumes: list | None = None,
                   volume_mounts: list | None = None) -> None:
        namespace = namespace or self.namespace
        for field, value in (("labels", labels), ("annotations", annotations)):
            if value is not None and not (isinstance(value, dict) and all(isinstance(item, str) for pair in
                                                                            value.items() for item in pair)):
                raise InvalidArgument(f"{field}={value!r}: give a dict of strings, e.g. {{'team': 'ml'}}")
        if parameters is not None and not isinstance(parameters, dict):
            raise InvalidArgument(f"parameters={parameters!r}: give a dict, which train_func receives as its "
                                  "argument, e.g. parameters={'lr': 0.1}")
        if num_procs_per_worker is not None and str(num_procs_per_worker) not in ("auto", "cpu", "gpu") and not (
                type(num_procs_per_worker) in (int, str) and str(num_procs_per_worker).isdigit()
                and int(num_procs_per_worker) >= 1):
            raise InvalidArgument(f"num_procs_per_worker={num_procs_per_worker!r}: give a count of at least 1, "
                                  "or 'auto', 'cpu' or 'gpu' (as torchrun's --nproc-per-node)")
        if queue_name is not None and not isinstance(queue_name, str):
            raise InvalidArgument(f"queue_name={queue_name!r}: give the Kueue LocalQueue's name")
        if job is not None:
            self.submit_dict(job, namespace, labels, annotations)
            return
        kind = job_kind or self.job_kind
        if kind not in FUNCTION_KINDS:
            raise InvalidArgument(f"job_kind {kind!r}: a job from train_func or base_image is a PyTorchJob or TFJob "
                                  "(as upstream); for other kinds use trainctl.Client().run(..., framework=...)")
        if volumes or volume_mounts:
            raise InvalidArgument("volumes/volume_mounts: Kubernetes objects are not taken here; use "
                                  "Client().run(..., volume=['pvc:CLAIM:/path'])")
        if train_func is None or name is None:
            raise InvalidArgument("create_job needs name= and train_func= (a job from base_image alone runs the "
                                  "image's entrypoint, which a local run has not: use trainctl.Client().run(['python', "
                                  "'train.py'], image=...))")
        if pip_index_url != UPSTREAM_PIP_INDEX:
            raise InvalidArgument(f"pip_index_url={pip_index_url!r}: not supported; configure pip where the job runs")
        self.client.run(
            train_func, framework=kind, name=name, namespace=namespace,
            args=positional_parameters(train_func, parameters),
            workers=num_workers, nproc_per_node=None if num_procs_per_worker is None else str(num_procs_per_worker),
            chief=num_chief_replicas, ps=num_ps_replicas, packages=packages_to_install, image=base_image,
            env=env_dict(env_vars), annotation=annotations, label=with_queue(labels, queue_name),
            **resources(resources_per_worker))

    def submit_dict(self, job: object, namespace: str | None, labels: dict | None, annotations: dict | None) -> None:
        if not isinstance(job, dict):
            raise InvalidArgument(f"job: give the resource as a dict, not {type(job).__name__} (for a model object: "
                                  "kubernetes.client.ApiClient().sanitize_for_serialization(job))")
        metadata = job.setdefault("metadata", {})
        if namespace:
            metadata["namespace"] = namespace
        for field, extra in (("labels", labels), ("annotations", annotations)):
            if extra:
                metadata[field] = {**(metadata.get(field) or {}), **extra}
        checked(validate, job)  # the resource's mistakes are the caller's argument's: InvalidArgument
        self.client.submit(job)

    def get_job(self, name: str, namespace: str | None = None, job_kind: str | None = None, timeout: int = 120) -> dict:
        return self.client.get(name, namespace or self.namespace, job_kind).resource

    def get_job_logs(self, name: str, namespace: str | None = None, job_kind: str | None = None,
                     is_master: bool = True, replica_type: str | None = None, replica_index: int | None = None,
                     follow: bool = False, timeout: int = 120, verbose: bool = False) -> tuple[dict[str, str], dict]:
        """``({pod name: its log}, {})`` of the master pod, or of the pods of one replica type or index; with
        ``follow``, each line is also printed as ``[Pod NAME]: line`` as it comes (as upstream)."""
        from trainctl.job import Job

        namespace = namespace or self.namespace
        job = Job(self.get_job(name, namespace, job_kind))
        wanted = {job.replica_id(rtype, index) for rtype in job.replica_types for index in range(job.replicas(rtype))
                  if (replica_type is None or rtype.lower() == replica_type.lower())
                  and (replica_index is None or index == replica_index)
                  and (not is_master or job.is_master_role(rtype, index))}
        logs: dict[str, str] = {}
        for line in self.client.logs(name, namespace, follow=follow):
            if line.replica in wanted:
                pod = f"{name}-{line.replica}"
                if follow:
                    print(f"[Pod {pod}]: {line.text}", flush=True)
                logs[pod] = logs.get(pod, "") + line.text + "\n"
        return logs, {}

    def wait_for_job_conditions(self, name: str, namespace: str | None = None, job_kind: str | None = None,
                                expected_conditions: set = frozenset({"Succeeded"}), wait_timeout: int = 600,
                                polling_interval: int = 15, callback: Callable | None = None,
                                timeout: int = 120) -> dict:
        """The job once one of ``expected_conditions`` is True; FailedJob (a RuntimeError) if it failed first,
        TimeoutError after ``wait_timeout`` seconds. Polls at most every second, whatever ``polling_interval``."""
        unknown = set(expected_conditions) - set(JOB_CONDITIONS)
        if unknown:
            raise InvalidArgument(f"expected_conditions {sorted(unknown)}: use some of {', '.join(JOB_CONDITIONS)}")
        namespace = namespace or self.namespace
        deadline = time.monotonic() + wait_timeout
        while True:
            job = self.get_job(name, namespace, job_kind)
            if callback:
                callback(job)
            true = {c.get("type") for c in conditions_of(job) if c.get("status") == "True"}
            if "Failed" in true and "Failed" not in expected_conditions:
                raise FailedJob(self.client.failure_summary(name, namespace))
            if true & set(expected_conditions):
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"Timeout waiting for {name} to reach {sorted(expected_conditions)}")
            time.sleep(min(polling_interval, 1.0))

    def delete_job(self, name: str, namespace: str | None = None, job_kind: str | None = None,
                   delete_options=None) -> None:
        self.client.delete(name, namespace or self.namespace)


def positional_parameters(func: Callable, parameters: dict | None) -> dict | None:
    """Upstream calls ``train_func(parameters)``: as keywords, the dict goes to the first parameter's name."""
    if parameters is None:
        return None
    try:
        names = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):  # not a function: run() refuses it, saying what it takes
        return {"parameters": parameters}
    if not names:
        raise InvalidArgument(f"parameters: {func.__name__}() takes no argument to receive them")
    return {names[0]: parameters}


def resources(per_worker: dict | None) -> dict:
    if per_worker is None:
        return {}
    if not isinstance(per_worker, dict):
        raise InvalidArgument("resources_per_worker: give a dict such as {'cpu': '2', 'memory': '4Gi', 'gpu': 1}")
    gpu = per_worker.get("gpu")
    return {"cpu": per_worker.get("cpu"), "memory": per_worker.get("memory"),
            "gpus": int(gpu) if isinstance(gpu, str) and gpu.isdigit() else gpu}


def env_dict(env_vars: dict | list | None) -> dict | None:
    """A dict as it is; upstream's list of V1EnvVar by their name and value."""
    if env_vars is None or isinstance(env_vars, dict):
        return env_vars
    try:
        return {variable.name: variable.value for variable in env_vars}
    except (AttributeError, TypeError):
        raise InvalidArgument("env_vars: give a dict or a list of V1EnvVar (name and value)") from None


def with_queue(labels: dict | None, queue_name: str | None) -> dict | None:
    if not queue_name or not queue_name.strip():
        return labels
    return {**(labels or {}), KUEUE_QUEUE_LABEL: queue_name}
