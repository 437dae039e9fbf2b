"""What ``apply`` adds to a TrainJob and says of it: ``--entrypoint``'s program as the trainer command where neither
the TrainJob nor its runtime names one (the runtime relies on its image's ENTRYPOINT, which a local run has not),
and a note for what the TrainJob asks that nothing will do (:func:`notes`).

A TrainJob's ``trainer.command`` replaces the command of the ``node`` container of its runtime's trainer step (the
replicatedJob labelled ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``), so that is where the program goes.
"""

from __future__ import annotations

from trainctl.core.runtime_patches import without_local_effect
from trainctl.core.trainer_crds import CLUSTER_RUNTIME
from trainctl.core.trainer_runtimes import default_runtimes, runtime_names
from trainctl.core.trainjob import INITIALIZERS, TrainJob, ancestor_of, is_trainjob, pod_template
from trainctl.errors import UserError
from trainctl.frameworks.base import ANCESTOR_TRAINER, LABEL_ANCESTOR_STEP, NODE


def with_entrypoint(resource: dict, words: list[str], given: dict | None) -> None:
    """Give the TrainJob ``resource`` the trainer command ``words`` unless it or its runtime's trainer container
    names one (``given``: the runtime beside it in its file, if any). A runtime trainctl cannot read here (one
    installed on a cluster) is taken to name none: the user asked for the program."""
    job = TrainJob(resource)
    if (job.trainer or {}).get("command"):
        return
    runtime = known_runtime(job, given)
    if runtime is not None and trainer_container(runtime, job.name).get("command"):
        return
    resource["spec"]["trainer"] = {**(resource["spec"].get("trainer") or {}), "command": list(words)}


def known_runtime(job: TrainJob, given: dict | None) -> dict | None:
    """The runtime given beside the TrainJob in its file, else trainctl's default runtime of that name, else None."""
    if given is not None:
        return given
    ref = job.runtime_ref
    if ref["kind"] == CLUSTER_RUNTIME and ref["name"] in runtime_names():
        return default_runtimes([ref["name"]])[0]
    return None


def trainer_container(runtime: dict, job_name: str) -> dict:
    """The container the TrainJob's trainer fields go to: the ``node`` container (else the first) of the trainer
    step; a runtime without a trainer step is one line, as --entrypoint would reach no container."""
    replicated_jobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs")
    trainer = next((rj for rj in replicated_jobs or [] if isinstance(rj, dict) and ancestor_of(rj) == ANCESTOR_TRAINER),
                   None)
    if trainer is None:
        name = (runtime.get("metadata") or {}).get("name")
        raise UserError(f"--entrypoint: TrainJob {job_name!r} runs on runtime {name!r}, which has no trainer step "
                        f"(a replicatedJob whose template is labelled {LABEL_ANCESTOR_STEP}: {ANCESTOR_TRAINER}), so "
                        "the TrainJob's command reaches no container: label the replicatedJob that trains, or give "
                        "its container the command in the runtime")
    containers = ((pod_template(trainer).get("spec") or {}).get("containers")) or [{}]
    return next((c for c in containers if c.get("name") == NODE), containers[0])


def notes(resource: dict, local: bool, given: dict | None) -> list[str]:
    """One line for each thing the TrainJob ``resource`` asks that nothing will do: on the local backend
    (``local``), the fields of its runtime patches a process cannot honour; anywhere, an initializer its runtime
    (``given`` in its file, or trainctl's default) has no step for (upstream ignores it too)."""
    if not is_trainjob(resource):
        return []
    job = TrainJob(resource)
    found = []
    unhonoured = without_local_effect(job.spec.get("runtimePatches")) if local else []
    if unhonoured:
        found.append(f"TrainJob {job.name!r} spec.runtimePatches: {', '.join(unhonoured)} change nothing on the local "
                     "backend (each node is a process on this machine), only on a cluster")
    runtime = known_runtime(job, given)
    steps = {ancestor_of(rj) for rj in (((runtime or {}).get("spec") or {}).get("template") or {}).get(
        "spec", {}).get("replicatedJobs") or [] if isinstance(rj, dict)}
    for field, step in INITIALIZERS.items():
        if runtime is not None and ((job.spec.get("initializer") or {}).get(field) is not None) and step not in steps:
            found.append(f"TrainJob {job.name!r} spec.initializer.{field}: runtime {runtime['metadata']['name']!r} "
                         f"has no {step} step, so nothing runs it: use a runtime with a replicatedJob labelled "
                         f"{LABEL_ANCESTOR_STEP}: {step}")
    return found
