"""The registry of frameworks: every module of this package is one, looked up by CLI name, alias or kind.

A framework is a module here that defines ``FRAMEWORK``, an instance of a
:class:`~trainctl.frameworks.base.Framework` subclass, plus its template
``templates/<kind>.yaml.j2``. The registry finds the modules itself: the ones that
came first keep their place (:data:`LISTED`, the order ``--help`` and every list
shows), any other follows by name. Nothing else names a framework: the engine asks
the one a job's ``kind`` picks. The package imports nothing of trainctl's but the ground
floor (errors and the API group); every layer above may ask it.
"""

from __future__ import annotations

import importlib
import os

from trainctl import API_GROUP
from trainctl.errors import UserError
from trainctl.frameworks.base import Framework, KindOption

LISTED = ("pytorch", "tensorflow", "xgboost", "mpi", "paddle", "jax")
NOT_FRAMEWORKS = ("base",)  # modules of this package that hold no framework (and those starting with _)


def module_names(paths: list[str], listed: tuple[str, ...], skipped: tuple[str, ...]) -> list[str]:
    """The modules (files, not subpackages) of a package: the listed ones in order, then the others by name;
    never ``skipped`` ones nor those starting with _."""
    found = {entry.name.removesuffix(".py") for directory in paths for entry in os.scandir(directory)
             if entry.name.endswith(".py") and not entry.name.startswith("_")} - set(skipped)
    return [name for name in listed if name in found] + sorted(found - set(listed))


def discovered() -> tuple[Framework, ...]:
    """Each framework module's FRAMEWORK: the listed ones in order, then the others by module name. The
    subpackage ``policies`` (Trainer v2's ML policies) is a registry of its own."""
    names = module_names(__path__, LISTED, NOT_FRAMEWORKS)
    return tuple(importlib.import_module(f"{__name__}.{name}").FRAMEWORK for name in names)


ALL: tuple[Framework, ...] = discovered()
_BY_NAME = {alias: fw for fw in ALL for alias in (*fw.cli_names, fw.kind.lower(), fw.plural)}
_BY_KIND = {fw.kind: fw for fw in ALL}
CLI_NAMES = tuple(fw.name for fw in ALL)
KINDS = tuple(fw.kind for fw in ALL)
DEFAULT = ALL[0]  # the first listed: the one help's examples show
# the images ``trainctl controller run``/``install`` take an option for, by HelperImage.key
HELPER_IMAGES = {helper.key: helper for fw in ALL for helper in fw.helper_images}
# Kubeflow Trainer v2's default ClusterTrainingRuntimes (``trainctl runtimes``) by name, with their framework
TRAINER_RUNTIMES = {runtime.name: (fw, runtime) for fw in ALL for runtime in fw.trainer_runtimes}


def by_name(name: str) -> Framework:
    """The framework for any spelling a user may type: ``pytorch``, ``tf``, ``PyTorchJob``,
    ``pytorchjobs`` or ``pytorchjob.kubeflow.org`` (kubectl's forms)."""
    alias = name.lower().removesuffix(f".{API_GROUP}")
    if alias in _BY_NAME:
        return _BY_NAME[alias]
    import difflib

    guess = difflib.get_close_matches(alias, _BY_NAME, n=1, cutoff=0.6)
    hint = f"did you mean {_BY_NAME[guess[0]].name}? " if guess else ""
    raise UserError(f"unknown job kind {name!r}: {hint}use one of {', '.join(CLI_NAMES)}")


def by_kind(kind: str) -> Framework:
    """The framework for a resource ``kind`` such as ``TFJob`` (exact match)."""
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise UserError(
            f"unsupported kind {kind!r}: trainctl handles {', '.join(_BY_KIND)} (apiVersion kubeflow.org/v1)"
        ) from None


def kind_options() -> dict[str, tuple[Framework, KindOption]]:
    """Every framework's own submit options by name: ``{"ps": (tensorflow, KindOption(...)), ...}``."""
    return {option.name: (framework, option) for framework in ALL for option in framework.options}


__all__ = ["ALL", "CLI_NAMES", "KINDS", "Framework", "by_kind", "by_name", "kind_options"]
