"""The Kubeflow Training SDK v1's ``TrainingClient`` job methods, over trainctl, so an upstream notebook
runs unchanged but for one import, locally or on a cluster:

    from kubeflow.training import TrainingClient   ->   from trainctl.compat import TrainingClient

Why a class rather than upstream's parameter names as aliases on ``Client.run``: the calls mean
different things, not just differently spelled ones. Upstream calls ``train_func(parameters)`` with
one positional dict where ``run`` calls ``func(**args)``; ``get_job_logs`` returns ``({pod: text},
{events})``, ``wait_for_job_conditions`` waits for a set of conditions and raises RuntimeError,
``create_job`` returns nothing. Aliases would give ``run`` two names per concept and still not make
an upstream notebook run; this class keeps ``run`` small and speaks upstream's dialect whole.

Covered, with upstream's signatures: ``create_job`` with ``name`` and ``train_func`` for PyTorchJob
and TFJob (as upstream), or a ``job`` given as a dict or a job object of any kind; ``get_job``,
``list_jobs``, ``get_job_conditions``, ``is_job_created``/``running``/``restarting``/``succeeded``/
``failed``, ``wait_for_job_conditions``, ``get_job_pods``, ``get_job_pod_names``, ``get_job_logs``
(with ``verbose``: the job's events), ``update_job`` (``spec.run_policy.suspend``: suspend and resume)
and ``delete_job``. Where upstream returns Kubernetes client models (``KubeflowOrgV1PyTorchJob``,
``V1Pod``) this returns :mod:`trainctl.sdk.compat_models` objects with the same attribute names, so
``job.metadata.name`` and ``job.status.conditions[-1].type`` read as upstream, with no kubernetes
package. Upstream parameters mapped onto ``run``'s keywords: ``num_workers`` -> workers,
``num_procs_per_worker`` -> nproc_per_node (torchrun, as upstream), ``resources_per_worker`` cpu/memory/gpu
-> cpu/memory/gpus, ``base_image`` -> image, ``env_vars``, ``labels``, ``annotations``,
``num_chief_replicas``/``num_ps_replicas`` -> chief/ps, ``queue_name`` -> local_queue (``submit --local-queue``:
Kueue's queue label and ``runPolicy.suspend: true``, so a local run refuses it as it refuses --local-queue).
``packages_to_install`` goes to ``run``'s packages. Kubernetes objects
(V1ResourceRequirements, V1Volume ...) are refused with what to pass instead: trainctl does not import
the Kubernetes client for a notebook. ``train`` (the LLM fine-tuning with storage initializers) is
refused in favour of :meth:`trainctl.Client.finetune`.
"""

from __future__ import annotations

import copy
import inspect
import time
from collections.abc import Callable

from trainctl.core.conditions import true_types
from trainctl.core.job import Job
from trainctl.core.validation import validate
from trainctl.errors import InvalidArgument, JobFailed
from trainctl.sdk.client import Client
from trainctl.sdk.compat_models import Model, job_model, pod_model, resource_of
from trainctl.sdk.running import checked
from trainctl.submit.options import local_queue

FUNCTION_KINDS = ("PyTorchJob", "TFJob")  # the kinds upstream builds from a function or an image
JOB_CONDITIONS = ("Created", "Running", "Restarting", "Succeeded", "Failed", "Suspended")
UPSTREAM_PIP_INDEX = "https://pypi.org/simple"
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed")


class FailedJob(JobFailed, RuntimeError):
    """Upstream raises RuntimeError for a failed job; this one also carries trainctl's failure summary."""


def condition_test(ctype: str) -> Callable[..., bool]:
    """Upstream's ``is_job_<condition>`` method: whether that condition of the job (by name, or what get_job
    returned) is True."""
    def test(self, name: str | None = None, namespace: str | None = None, job_kind: str | None = None,
             job: Model | None = None, timeout: int = 120) -> bool:
        return any(condition.type == ctype and condition.status == "True"
                   for condition in self.get_job_conditions(name, namespace, job_kind, job))

    test.__name__ = test.__qualname__ = f"is_job_{ctype.lower()}"
    test.__doc__ = f"Whether the job's {ctype} condition is True (by ``name``, or ``job`` as get_job returned it)."
    return test


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
        check_common_arguments(labels, annotations, parameters, num_procs_per_worker, queue_name)
        if job is not None:
            self.submit_dict(job, namespace, labels, annotations)
            return
        kind = job_kind or self.job_kind
        check_function_job(kind, name, train_func, bool(volumes or volume_mounts), pip_index_url)
        self.client.run(
            train_func, framework=kind, name=name, namespace=namespace,
            args=positional_parameters(train_func, parameters),
            workers=num_workers, nproc_per_node=None if num_procs_per_worker is None else str(num_procs_per_worker),
            chief=num_chief_replicas, ps=num_ps_replicas, packages=packages_to_install, image=base_image,
            env=env_dict(env_vars), annotation=annotations, label=labels, local_queue=queue_name or None,
            **resources(resources_per_worker))

    def submit_dict(self, job: object, namespace: str | None, labels: dict | None, annotations: dict | None) -> None:
        if isinstance(job, Model):
            job = copy.deepcopy(resource_of(job))
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

    def train(self, *args, **kwargs) -> None:
        raise InvalidArgument("train(): its storage initializers and trainer image are not taken here; fine-tune "
                              "with trainctl.Client().finetune(model, dataset, workers=N, lora={...}, "
                              "training_args={...}) (docs/finetuning.md)")

    # ---- reading a job ------------------------------------------------------------------------
    def get_job(self, name: str, namespace: str | None = None, job_kind: str | None = None,
                timeout: int = 120) -> Model:
        """The job as an object read by attribute, as upstream's ``KubeflowOrgV1PyTorchJob``."""
        return job_model(self.client.get(name, namespace or self.namespace, job_kind).resource)

    def list_jobs(self, namespace: str | None = None, job_kind: str | None = None, timeout: int = 120) -> list[Model]:
        """Every job of ``job_kind`` (the client's, PyTorchJob by default) in the namespace, as upstream."""
        kind = job_kind or self.job_kind
        return [job_model(resource) for resource in self.client.list(namespace or self.namespace)
                if resource.get("kind") == kind]

    def get_job_conditions(self, name: str | None = None, namespace: str | None = None, job_kind: str | None = None,
                           job: Model | None = None, timeout: int = 120) -> list[Model]:
        """The job's conditions (type, status, reason, message, last_transition_time ...); [] when it has none."""
        if job is None:
            if name is None:
                raise InvalidArgument("get_job_conditions: give the job's name=, or job= (what get_job returned)")
            job = self.get_job(name, namespace, job_kind, timeout)
        elif not isinstance(job, Model) or "status" not in job.attribute_map:
            raise InvalidArgument(f"job={job!r}: give what get_job returned, or name=")
        return list(job.status.conditions or []) if job.status else []

    is_job_created = condition_test("Created")
    is_job_running = condition_test("Running")
    is_job_restarting = condition_test("Restarting")
    is_job_succeeded = condition_test("Succeeded")
    is_job_failed = condition_test("Failed")

    def wait_for_job_conditions(self, name: str, namespace: str | None = None, job_kind: str | None = None,
                                expected_conditions: set = frozenset({"Succeeded"}), wait_timeout: int = 600,
                                polling_interval: int = 15, callback: Callable | None = None,
                                timeout: int = 120) -> Model:
        """The job once one of ``expected_conditions`` is True; FailedJob (a RuntimeError) if it failed first,
        TimeoutError after ``wait_timeout`` seconds. Polls at most every second, whatever ``polling_interval``;
        ``callback`` gets the job object at each poll, as upstream."""
        unknown = set(expected_conditions) - set(JOB_CONDITIONS)
        if unknown:
            raise InvalidArgument(f"expected_conditions {sorted(unknown)}: use some of {', '.join(JOB_CONDITIONS)}")
        namespace = namespace or self.namespace
        deadline = time.monotonic() + wait_timeout
        while True:
            resource = self.client.get(name, namespace, job_kind).resource
            if callback:
                callback(job_model(resource))
            true = set(true_types(resource))
            if "Failed" in true and "Failed" not in expected_conditions:
                raise FailedJob(self.client.failure_summary(name, namespace))
            if true & set(expected_conditions):
                return job_model(resource)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"Timeout waiting for {name} to reach {sorted(expected_conditions)}")
            time.sleep(min(polling_interval, 1.0))

    # ---- its pods and their logs ----------------------------------------------------------------
    def get_job_pods(self, name: str, namespace: str | None = None, is_master: bool = False,
                     replica_type: str | None = None, replica_index: int | None = None,
                     timeout: int = 120) -> list[Model]:
        """Its replicas as pods (``V1Pod``: metadata with upstream's labels, spec.node_name, status.phase and
        start_time): all, the master's, or those of one replica type (any case) or index, as upstream selects."""
        details = self.client.get(name, namespace or self.namespace)
        job = Job(details.resource)
        return [pod_model(replica_pod(job, row)) for row in details.replicas
                if (replica_type is None or row.replica_type.lower() == replica_type.lower())
                and (replica_index is None or row.index == replica_index)
                and (not is_master or job.is_master_role(row.replica_type, row.index or 0))]

    def get_job_pod_names(self, name: str, namespace: str | None = None, is_master: bool = False,
                          replica_type: str | None = None, replica_index: int | None = None,
                          timeout: int = 120) -> list[str]:
        return [pod.metadata.name for pod in self.get_job_pods(name, namespace, is_master, replica_type, replica_index)]

    def get_job_logs(self, name: str, namespace: str | None = None, job_kind: str | None = None,
                     is_master: bool = True, replica_type: str | None = None, replica_index: int | None = None,
                     follow: bool = False, timeout: int = 120, verbose: bool = False) -> tuple[dict[str, str], dict]:
        """``({pod name: its log}, {})`` of the master pod, or of the pods of one replica type or index (pods still
        Pending have none yet); with ``follow``, each line is also printed as ``[Pod NAME]: line`` as it comes,
        and with ``verbose`` the second dict holds the job's events, as upstream. Only what the program printed:
        a function job's result line is trainctl's (JobHandle.result reads it)."""
        from trainctl.sdk.handle import JobHandle

        namespace = namespace or self.namespace
        pods = {pod.metadata.name: pod for pod in self.get_job_pods(name, namespace, is_master, replica_type,
                                                                     replica_index)}
        logs = {pod_name: "" for pod_name, pod in pods.items() if pod.status.phase != "Pending"}
        for line in JobHandle(self.client, name, namespace).logs(follow=follow):
            pod_name = f"{name}-{line.replica}"
            if pod_name in pods:
                if follow:
                    print(f"[Pod {pod_name}]: {line.text}", flush=True)
                logs[pod_name] = logs.get(pod_name, "") + line.text + "\n"
        return logs, (self.job_events(name, namespace, job_kind) if verbose else {})

    def job_events(self, name: str, namespace: str | None, job_kind: str | None) -> dict[str, list[str]]:
        """``{"PyTorchJob NAME": ["2024-01-05 22:58:20 message", ...]}``, as upstream's verbose logs give them."""
        details = self.client.get(name, namespace, job_kind)
        lines = [f"{str(event.get('time') or '').replace('T', ' ').removesuffix('Z')} {event.get('message') or ''}"
                 for event in details.events]
        return {f"{details.resource['kind']} {name}": lines} if lines else {}

    # ---- changing it ----------------------------------------------------------------------------
    def update_job(self, job: Model | dict, name: str, namespace: str | None = None,
                   job_kind: str | None = None) -> None:
        """Apply a change of ``spec.run_policy.suspend``: suspend or resume the job, the update notebooks make."""
        wanted = copy.deepcopy(resource_of(job) if isinstance(job, Model) else job)
        if not isinstance(wanted, dict):
            raise InvalidArgument(f"job: give what get_job returned (changed), not {type(job).__name__}")
        namespace = namespace or self.namespace
        stored = self.client.get(name, namespace, job_kind).resource
        suspend = bool(((wanted.get("spec") or {}).get("runPolicy") or {}).get("suspend"))
        if without_suspend(wanted) != without_suspend(stored):
            raise InvalidArgument("update_job: trainctl applies a change of spec.run_policy.suspend only (suspend or "
                                  "resume); for any other change, delete_job and create_job it again")
        (self.client.suspend if suspend else self.client.resume)(name, namespace)

    def delete_job(self, name: str, namespace: str | None = None, job_kind: str | None = None,
                   delete_options=None) -> None:
        self.client.delete(name, namespace or self.namespace)


def check_common_arguments(labels: object, annotations: object, parameters: object, num_procs_per_worker: object,
                           queue_name: object) -> None:
    """create_job's arguments that every form of it takes, each refused as upstream's type hints would."""
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
    checked(local_queue, queue_name or None, "queue_name")  # submit --local-queue's rule, spelled queue_name


def check_function_job(kind: str, name: str | None, train_func: object, kubernetes_objects: bool,
                       pip_index_url: str) -> None:
    """What a job made from ``train_func`` (rather than given whole) needs, as trainctl can run it."""
    if kind not in FUNCTION_KINDS:
        raise InvalidArgument(f"job_kind {kind!r}: a job from train_func or base_image is a PyTorchJob or TFJob "
                              "(as upstream); for other kinds use trainctl.Client().run(..., framework=...)")
    if kubernetes_objects:
        raise InvalidArgument("volumes/volume_mounts: Kubernetes objects are not taken here; use "
                              "Client().run(..., volume=['pvc:CLAIM:/path'])")
    if train_func is None or name is None:
        raise InvalidArgument("create_job needs name= and train_func= (a job from base_image alone runs the "
                              "image's entrypoint, which a local run has not: use trainctl.Client().run(['python', "
                              "'train.py'], image=...))")
    if pip_index_url != UPSTREAM_PIP_INDEX:
        raise InvalidArgument(f"pip_index_url={pip_index_url!r}: not supported; configure pip where the job runs")


def replica_pod(job: Job, row) -> dict:
    """One replica as the pod upstream lists: its name and labels, node, phase and start time."""
    metadata = {"name": row.name, "namespace": job.namespace,
                "labels": job.labels(row.replica_type, row.index or 0)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"nodeName": row.node or None},
            "status": {"phase": pod_phase(row.state), "startTime": row.started}}


def pod_phase(state: str) -> str:
    """The pod phase behind the state ``status`` shows as kubectl does (Init:..., CrashLoopBackOff, a waiting
    container's reason)."""
    if state.split(" ")[0] in POD_PHASES:  # also the local backend's "Running (unsupervised)"
        return state.split(" ")[0]
    if state == "CrashLoopBackOff":  # a container restarting in a running pod
        return "Running"
    return "Pending" if state.startswith("Init:") or state.endswith(("BackOff", "Creating", "ErrImagePull")) \
        else "Unknown"


def without_suspend(resource: dict) -> tuple:
    """What update_job compares: the spec bar runPolicy.suspend, and the labels and annotations."""
    spec = copy.deepcopy(resource.get("spec") or {})
    (spec.get("runPolicy") or {}).pop("suspend", None)
    metadata = resource.get("metadata") or {}
    return spec, metadata.get("labels") or {}, metadata.get("annotations") or {}


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

