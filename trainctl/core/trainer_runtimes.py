"""The default ClusterTrainingRuntimes of Kubeflow Trainer v2, as ``trainctl runtimes install`` installs them.

Upstream ships one runtime per plugin and framework (``torch-distributed``, ``deepspeed-distributed``, ...:
contract section 5); each framework module declares its own (``trainer_runtimes``, with upstream's name, label
and image) and their spec (``trainer_runtime_spec``). Here they become whole objects, in upstream's shape and
conventions: the ``trainer.kubeflow.org/framework`` label the SDK lists runtimes by, and a job template
labelled ``trainjob-ancestor-step: trainer`` whose container ``node`` a TrainJob's trainer fields fill
(tests/unit/test_trainer_v2_crds.py compares them with upstream's files). A cluster that cannot pull
upstream's images names its own, runtime by runtime: ``--image torch-distributed=registry.local/pytorch:2.13``.
"""

from __future__ import annotations

import difflib

from trainctl import TRAINER_API_VERSION
from trainctl.core.trainer_crds import CLUSTER_RUNTIME
from trainctl.errors import UserError
from trainctl.frameworks import TRAINER_RUNTIMES, Framework
from trainctl.frameworks.base import ANCESTOR_TRAINER, LABEL_ANCESTOR_STEP, LABEL_TRAINER_FRAMEWORK, NODE, TrainerRuntime
from trainctl.kube.names import image_problem

EXAMPLE_IMAGE = "registry.local/team/trainer:1.0"


def runtime_names() -> list[str]:
    return list(TRAINER_RUNTIMES)


def example() -> str:
    """``--image torch-distributed=registry.local/team/trainer:1.0``: what a fix shows."""
    return f"--image {runtime_names()[0]}={EXAMPLE_IMAGE}"


def parse_images(values: list[str] | None) -> dict[str, str]:
    """``--image RUNTIME=IMAGE`` values as {runtime: image}; a one-line UserError names the one that is wrong."""
    images: dict[str, str] = {}
    for value in values or []:
        name, equals, image = value.partition("=")
        if not equals:
            raise UserError(f"--image {value!r}: write RUNTIME=IMAGE, e.g. {example()}")
        check_runtime_name(name, f"--image {value!r}")
        problem = image_problem(image)
        if problem:
            raise UserError(f"--image {value!r}: {image!r} is {problem}")
        if images.get(name, image) != image:
            raise UserError(f"--image {name}= given twice ({images[name]!r}, {image!r}): give each runtime one image")
        images[name] = image
    return images


def check_runtime_name(name: str, where: str = "") -> None:
    """A UserError (after ``where``) unless ``name`` is a default runtime's."""
    names = runtime_names()
    if name not in names:
        guess = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        hint = f"did you mean {guess[0]}? " if guess else ""
        raise UserError(f"{where + ': ' if where else ''}no default runtime {name!r}; {hint}use one of "
                        f"{', '.join(names)}")


def default_runtimes(names: list[str] | None = None, images: dict[str, str] | None = None) -> list[dict]:
    """The ClusterTrainingRuntimes ``names`` (default: all), each with its image from ``images`` or upstream's."""
    for name in names or []:
        check_runtime_name(name)
    images = images or {}
    return [runtime_object(framework, runtime, images.get(name, runtime.image))
            for name, (framework, runtime) in TRAINER_RUNTIMES.items() if not names or name in names]


def runtime_object(framework: Framework, runtime: TrainerRuntime, image: str) -> dict:
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": CLUSTER_RUNTIME,
        "metadata": {"name": runtime.name, "labels": {LABEL_TRAINER_FRAMEWORK: runtime.label}},
        "spec": framework.trainer_runtime_spec(image),
    }


def node_image(runtime: dict) -> str | None:
    """The image of a runtime's trainer: its ``node`` container in the job labelled the trainer's ancestor."""
    for job in runtime["spec"].get("template", {}).get("spec", {}).get("replicatedJobs", []):
        if job["template"].get("metadata", {}).get("labels", {}).get(LABEL_ANCESTOR_STEP) == ANCESTOR_TRAINER:
            containers = job["template"].get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
            return next((container.get("image") for container in containers if container["name"] == NODE), None)
    return None
