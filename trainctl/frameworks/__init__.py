"""The registry of frameworks: look a framework up by CLI name, alias or kind."""

from __future__ import annotations

from trainctl import API_GROUP
from trainctl.errors import UserError
from trainctl.frameworks import jax, mpi, paddle, pytorch, tensorflow, xgboost
from trainctl.frameworks.base import Framework

ALL: tuple[Framework, ...] = tuple(
    module.FRAMEWORK for module in (pytorch, tensorflow, xgboost, mpi, paddle, jax)
)
_BY_NAME = {alias: fw for fw in ALL for alias in (*fw.cli_names, fw.kind.lower(), fw.plural)}
_BY_KIND = {fw.kind: fw for fw in ALL}
CLI_NAMES = tuple(fw.name for fw in ALL)


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


__all__ = ["ALL", "CLI_NAMES", "Framework", "by_kind", "by_name"]
