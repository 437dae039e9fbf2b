"""The Trainer v2 ML policies: every module of this package mirrors one of upstream's ML policy plugins.

A runtime's ``spec.mlPolicy`` holds at most one policy field (``torch``, ``mpi``, ...); the module whose ``POLICY``
has that ``key`` decides what the TrainJob's pods get besides the runtime's template (counts, env, ports, files).
A runtime with none of them gets the plain one (``key`` ""). Adding a policy is one module here defining
``POLICY``, an instance of a :class:`~trainctl.frameworks.policies.base.Policy` subclass; the registry finds it.
"""

from __future__ import annotations

import importlib

from trainctl.errors import UserError
from trainctl.frameworks import module_names
from trainctl.frameworks.policies.base import Policy

ALL: tuple[Policy, ...] = tuple(importlib.import_module(f"{__name__}.{name}").POLICY
                                for name in module_names(__path__, (), ("base",)))
_BY_KEY = {policy.key: policy for policy in ALL}
KEYS = tuple(key for key in _BY_KEY if key)


def of(ml_policy: dict | None, runtime: str) -> tuple[Policy, dict]:
    """The policy a runtime's ``spec.mlPolicy`` names, and a copy of its section (``{}`` for the plain one)."""
    named = [key for key in (ml_policy or {}) if key in _BY_KEY and key and (ml_policy or {})[key] is not None]
    unknown = sorted(set(ml_policy or {}) - set(_BY_KEY) - {"numNodes"})
    if len(named) > 1:
        raise UserError(f"runtime {runtime!r}: spec.mlPolicy names {' and '.join(named)}: keep one")
    if unknown and not named:
        raise UserError(f"runtime {runtime!r}: spec.mlPolicy.{unknown[0]} is not supported by trainctl: "
                        f"use one of {', '.join(KEYS)} or none")
    if not named:
        return _BY_KEY[""], {}
    return _BY_KEY[named[0]], dict(ml_policy[named[0]] or {})


def named(key: str) -> Policy:
    """The policy of that ``key`` (a TrainJob's plan records it)."""
    return _BY_KEY[key]


__all__ = ["ALL", "KEYS", "Policy", "named", "of"]
