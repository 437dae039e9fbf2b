"""``--set PATH=VALUE``: change any field of the rendered resource.

PATH is dotted with list indexes, e.g.
``spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image``; a key that
contains dots is written in brackets with quotes: ``metadata.labels["example.com/team"]``.
VALUE is read as one YAML value (``3`` is a number, ``true`` a boolean, ``"3"`` a
string, ``[a, b]`` a list). Missing mappings along the path are created; the
edited resource is validated afterwards like any other.
"""

from __future__ import annotations

import copy
import re

from trainctl.errors import UserError, option, setting

TOKEN = re.compile(r'\.?([A-Za-z0-9_\-/]+)|\[(\d+)\]|\["([^"]+)"\]')


def parse_path(path: str) -> list[str | int]:
    steps: list[str | int] = []
    position = 0
    while position < len(path):
        match = TOKEN.match(path, position)
        if not match or (position == 0 and path.startswith(".")):
            raise UserError(f"{option('set')} {path!r}: malformed path at {path[position:]!r} "
                            "(example: spec.runPolicy.backoffLimit)")
        key, index, quoted = match.groups()
        steps.append(int(index) if index is not None else (key or quoted))
        position = match.end()
    if not steps:
        raise UserError(f"{option('set')}: empty path (example: {setting('set', ['spec.runPolicy.backoffLimit=3'])})")
    return steps


def parse_value(text: str, path: str) -> object:
    """One YAML value, read with the same limits as files (no alias bombs, no dates or sets)."""
    from trainctl.yamlsafe import load_one

    if not text.strip():
        return ""
    try:
        return load_one(text, f"{option('set')} {path}")
    except UserError as err:
        raise UserError(f"{err.message} (quote strings with special characters)") from None


def parse_assignment(assignment: str) -> tuple[str, list[str | int], object]:
    """``PATH=VALUE`` as (the path as written, its steps, the value), checked before anything renders."""
    path, sep, text = assignment.partition("=")
    if not sep:
        raise UserError(f"{option('set')} {assignment!r}: expected PATH=VALUE")
    return path, parse_path(path), parse_value(text, path)


def apply_set(resource: dict, assignment: tuple[str, list[str | int], object]) -> None:
    """Set the value of a parsed assignment (:func:`parse_assignment`) in ``resource``."""
    path, steps, value = assignment
    node: object = resource
    for step, following in zip(steps, steps[1:]):
        node = _child(node, step, following, path)
    _assign(node, steps[-1], copy.deepcopy(value), path)


def _child(node: object, step: str | int, following: str | int, path: str) -> object:
    empty = [] if isinstance(following, int) else {}
    if isinstance(step, int):
        if not isinstance(node, list) or step > len(node):
            raise UserError(f"{option('set')} {path}: index [{step}] is out of range")
        if step == len(node):
            node.append(empty)
        return node[step]
    if not isinstance(node, dict):
        raise UserError(f"{option('set')} {path}: {step!r} is not a field of a mapping")
    if node.get(step) is None:
        node[step] = empty
    return node[step]


def _assign(node: object, step: str | int, value: object, path: str) -> None:
    if isinstance(step, int):
        if not isinstance(node, list) or step > len(node):
            raise UserError(f"{option('set')} {path}: index [{step}] is out of range")
        if step == len(node):
            node.append(value)
        else:
            node[step] = value
    elif isinstance(node, dict):
        node[step] = value
    else:
        raise UserError(f"{option('set')} {path}: {step!r} is not a field of a mapping")
