"""``Client.finetune``: the LoRA fine-tuning recipe (:mod:`trainctl.recipes.finetune`) as a PyTorchJob.

The call only builds the recipe's command line and hands it to ``Client.run``, so every ``run``
keyword (workers, gpus, volume, packages, restart_policy ...) means what it means there. Where the
recipe comes from: locally, the installed module (``python -m trainctl.recipes.finetune``); on a
cluster, the file travels in the job's code snapshot under ``.trainctl/recipes/``, beside the
working directory, so the image needs Python, torch and the Hugging Face packages, not trainctl.
``recipe="my_finetune.py"`` runs your own copy instead (it travels with the working directory).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from trainctl.errors import InvalidArgument
from trainctl.recipes.finetune import (RESERVED_TRAINING, RESUME_MODES,  # the recipe's top level is stdlib only
                                       source_problem)

if TYPE_CHECKING:
    from trainctl.sdk.handle import JobHandle

RECIPE_MODULE = "trainctl.recipes.finetune"
SNAPSHOT_RECIPE = ".trainctl/recipes/finetune.py"  # relative to the pod's working directory
KEYWORDS = {"output_dir": "output_dir={!r}", "resume": "resume={!r}"}  # how the recipe's messages name them here


def finetune(client, model: str, dataset: str, *, output_dir: str, text_column: str,
             lora: dict | None, training_args: dict | None, max_length: int, merge: bool,
             deepspeed: str | None, resume: str, recipe: str | None, framework: str,
             run_keywords: dict) -> JobHandle | dict:
    """``client``: the trainctl.sdk.client.Client whose ``finetune`` this is; ``framework``: the one the recipe runs
    under (Client.finetune's: PyTorch)."""
    from trainctl.submit.options import generated_name

    local = client.backend_name == "local"
    if not local and not on_a_volume(output_dir, run_keywords.get("volume")):
        warnings.warn(f"output_dir={output_dir!r} is on no writable volume of the job: the checkpoints and the adapter "
                      "stay in each pod's working directory and go with the pod; mount one (volume=['pvc:CLAIM:/ckpt']) "
                      "and put output_dir under it", stacklevel=3)
    keywords = dict(run_keywords)
    if keywords.get("name") is None:  # a name that says what the job is, in `trainctl list` too
        keywords["name"] = generated_name("finetune")
    arguments = recipe_arguments(model, dataset, output_dir, text_column, lora, training_args, max_length,
                                 merge, deepspeed, local) + resume_arguments(resume, keywords["name"], local)
    if local and recipe is None:  # the replicas will read this very directory: refuse now what they would
        refuse_another_run(arguments)
    if recipe is not None:
        command, extra = [sys.executable if local else "python3", checked_recipe(recipe, local)], None
    elif local:
        command, extra = [sys.executable, "-m", RECIPE_MODULE], None
    elif run_keywords.get("no_workdir"):
        raise InvalidArgument("no_workdir: finetune's recipe travels to a cluster in the code snapshot; leave "
                              "no_workdir out, or give recipe= the path of the recipe inside the image")
    else:
        from trainctl.recipes import finetune as shipped

        command, extra = ["python3", SNAPSHOT_RECIPE], {SNAPSHOT_RECIPE: Path(shipped.__file__).read_bytes()}
    from trainctl.sdk.running import run

    switches = {key: keywords.pop(key) for key in ("packages", "replace", "preflight", "dry_run") if key in keywords}
    return run(client, command + arguments, framework=framework, args=None, packages=switches.get("packages"),
               replace=switches.get("replace", False), preflight=switches.get("preflight", True),
               dry_run=switches.get("dry_run", False), keywords=keywords, extra=extra)


def on_a_volume(output_dir: object, volume: object) -> bool:
    """Whether ``output_dir`` lies on a writable volume of the job's ``volume=`` keyword."""
    from trainctl.errors import UserError
    from trainctl.submit.options import volumes

    items = [volume] if isinstance(volume, str) else volume or []
    try:
        mounts = [PurePosixPath(item.mount_path) for item in volumes(list(items)) if not item.read_only]
    except (UserError, TypeError, AttributeError):
        return True  # not ours to judge: run() refuses the volume, naming what is wrong
    path = PurePosixPath(str(output_dir))
    return path.is_absolute() and any(mount == path or mount in path.parents for mount in mounts)


def recipe_arguments(model: str, dataset: str, output_dir: str, text_column: str, lora: dict | None,
                     training_args: dict | None, max_length: int, merge: bool, deepspeed: str | None,
                     local: bool) -> list[str]:
    """The recipe's flags, each value checked here (the job would only fail with it, later, in every replica).
    ``--flag=value``: a value that starts with a dash stays a value."""
    words = [f"--model={source(model, 'model', local)}", f"--dataset={source(dataset, 'dataset', local)}",
             f"--output-dir={text(output_dir, 'output_dir')}", f"--text-column={text(text_column, 'text_column')}",
             f"--max-length={positive(max_length, 'max_length')}",
             f"--lora={as_json(lora, 'lora', {})}",
             f"--training-args={as_json(training_args, 'training_args', RESERVED_TRAINING)}"]
    if not isinstance(merge, bool):
        raise InvalidArgument(f"merge={merge!r}: give True or False")
    if merge:
        words.append("--merge")
    if deepspeed is not None:
        words.append(f"--deepspeed={local_file(deepspeed, 'deepspeed') if local else text(deepspeed, 'deepspeed')}")
    return words


def resume_arguments(resume: object, job_name: object, local: bool) -> list[str]:
    """``--resume`` (auto, never, or a checkpoint) and ``--run-name``: the job's name, so that only this job's
    restarts continue its checkpoints (a name run() refuses is refused there, before anything exists)."""
    resume = text(resume, "resume")
    checked_here = local or not resume.startswith(("/", "~"))  # a cluster's own path (a volume's) is not ours
    if resume not in RESUME_MODES and checked_here and not Path(resume).expanduser().exists():
        raise InvalidArgument(f"resume={resume!r}: no such file or directory; give {' or '.join(RESUME_MODES)}, "
                              "or a checkpoint directory (output_dir/checkpoint-N)")
    return [f"--resume={resume}"] + ([f"--run-name={job_name}"] if isinstance(job_name, str) else [])


def refuse_another_run(arguments: list[str]) -> None:
    """The recipe's own check (resume_plan) of the output directory, run here: checkpoints of another run
    are refused before the job exists, in the keywords' words."""
    from trainctl.recipes import finetune as shipped

    try:
        shipped.resume_plan(shipped.parse_args(arguments), KEYWORDS)
    except shipped.RecipeError as error:
        raise InvalidArgument(str(error)) from None


def text(value: object, keyword: str) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise InvalidArgument(f"{keyword}={value!r}: give a non-empty string")
    return value


def source(value: object, keyword: str, local: bool) -> str:
    """A model or dataset: a path (checked where the replicas will read it: here, for the local backend, or
    in the working directory that travels) or a Hub id (downloaded by the replicas: the user's choice).
    The recipe's own check decides which a name is, so both refuse the same names."""
    name = text(value, keyword)
    if not local and name.startswith(("/", "~")):
        return name  # on a cluster that is the image's or a volume's path: not ours to check
    problem = source_problem(name, "file or directory")
    if problem is None:
        return name
    where = "" if local else " (a cluster reads it in the working directory that travels; a volume's is absolute)"
    raise InvalidArgument(f"{keyword}={name!r}: {problem}{where}")


def local_file(value: object, keyword: str) -> str:
    name = text(value, keyword)
    if not Path(name).expanduser().is_file():
        raise InvalidArgument(f"{keyword}={name!r}: no such file")
    return name


def checked_recipe(value: object, local: bool) -> str:
    return local_file(value, "recipe") if local else text(value, "recipe")


def positive(value: object, keyword: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{keyword}={value!r}: give a whole number of at least 1")
    return value


def as_json(value: object, keyword: str, reserved: dict[str, str]) -> str:
    """A dict of the recipe's config fields as the JSON its flag takes."""
    value = {} if value is None else value
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise InvalidArgument(f"{keyword}={value!r}: give a dict of field names to values, e.g. {{'r': 8}}")
    for key in value:
        if key in reserved:
            raise InvalidArgument(f"{keyword}: {key!r} is the recipe's to set (by {reserved[key]}); leave it out")
    try:
        return json.dumps(value, allow_nan=False, default=not_json)
    except ValueError as error:  # NaN or infinity: JSON has no spelling for them
        raise InvalidArgument(f"{keyword}: {error}; give finite numbers") from None
    except TypeError as error:
        raise InvalidArgument(f"{keyword}: {error}") from None


def not_json(value: object):
    """json.dumps' ``default`` (tuples it writes as lists itself): the message names what is wrong."""
    raise TypeError(f"cannot pass {type(value).__name__} {value!r} to the recipe: give numbers, strings, "
                    "booleans, None, lists and dicts")

