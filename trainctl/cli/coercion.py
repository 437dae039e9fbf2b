"""Converting option values without Pydantic: typer >= 0.29 builds a Pydantic TypeAdapter for
every parameter it parses, and importing Pydantic costs ~55 ms, a quarter of `trainctl list`.

trainctl's options are plain strings, integers, numbers, booleans, paths with no checks attached and
lists of strings; those are converted here (one ``-f`` path option alone made `submit` import Pydantic). Anything else (ranges with min/max, paths, choices, files) still goes to
typer's own builder, so its checks and messages stay. typer is pinned below 0.30 in
pyproject.toml because this hooks its (private) runtime-parameter builder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args, get_origin

import typer.core
from typer._click.exceptions import BadParameter
from typer._coercion import RuntimeParam, TypeDescriptor

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
#: a Path option's checks as typer leaves them by default: a path with any other is typer's to convert
UNCHECKED_PATH = {"exists": False, "file_okay": True, "dir_okay": True, "writable": False, "readable": True,
                  "resolve_path": False, "allow_dash": False, "path_type": None}


class PlainRuntimeParam(RuntimeParam):
    def _coerce_value(self, value: Any, param, ctx) -> Any:
        if get_origin(self.annotation) is list:
            return [str(item) for item in value]
        try:
            return convert(self.annotation, value)
        except ValueError:
            name = {int: "an integer", float: "a number"}.get(self.annotation, "true or false")
            raise BadParameter(f"{value!r} is not {name}", ctx=ctx, param=param) from None


def convert(annotation: type, value: Any) -> Any:
    if isinstance(value, annotation) and not (annotation is int and isinstance(value, bool)):
        return value
    if annotation is str:
        return str(value)
    if annotation is int:
        return int(value)  # ValueError for "x"
    if annotation is float:
        return float(value)
    if annotation is Path:
        return Path(value)
    text = str(value).lower()
    if text in TRUE or text in FALSE:
        return text in TRUE
    raise ValueError(value)


def is_plain(descriptor: TypeDescriptor) -> bool:
    info, annotation = descriptor.parameter_info, descriptor.annotation
    if descriptor.file_annotation is not None or info.parser is not None or info.min is not None \
            or info.max is not None or getattr(info, "click_type", None) is not None:
        return False
    if get_origin(annotation) is list:
        return get_args(annotation) == (str,)
    if annotation is Path:
        return all(getattr(info, name, default) == default for name, default in UNCHECKED_PATH.items())
    return annotation in (str, int, float, bool)


def install() -> None:
    """Route plain parameters to :class:`PlainRuntimeParam`; the rest to typer's builder."""
    typer_builder = typer.core.build_runtime_param

    def build(descriptor: TypeDescriptor) -> RuntimeParam:
        if is_plain(descriptor):
            return PlainRuntimeParam(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation)
        return typer_builder(descriptor)

    typer.core.build_runtime_param = build
