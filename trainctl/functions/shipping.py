"""Functions as jobs: what of a Python function travels to its replicas, and the rules for it.

``Client.run(train, args={...})`` turns ``train`` into three files (a :class:`Shipment`):
:mod:`trainctl.functions.runner` as ``trainctl_function.py``, ``call.json`` (the source to run,
the function's name, the job kind, whether the result is pickled), ``globals.pickle`` and
``args.pickle``. Each replica runs the runner, which rebuilds the module and calls ``train(**args)``. What source travels:

* A function of an importable module (``from mylib import train``): that module's whole
  source, run under the module's own name, so its helpers, classes and constants come along.
  Sibling modules it imports are found in the job's working directory (locally: the directory
  you submitted from).
* A function of ``__main__`` (a notebook cell, or the script that calls ``run``): never the
  whole notebook or script (re-running it would submit the job again), but the function's own
  source plus what its code names at the top level, found by reading its bytecode: modules are
  imported again by name (``np`` -> ``import numpy as np``), functions and classes of
  ``__main__`` travel as source (with what they name, in turn), and any other value (a constant,
  a config dict, a function of an installed library) is pickled. Imports inside the function
  body work as they always do.

Refused before anything is created, with the reason: lambdas, nested functions and closures that
the module's top level does not name (their enclosing scope cannot be rebuilt; a decorated
function can, by running its module or source again), generator and async functions, methods and
other callables that are not plain functions, functions whose source is not available (typed at a
bare ``python`` prompt), globals that cannot be pickled or re-imported, and ``args`` that do not
fit the function's signature or cannot be pickled.
"""

from __future__ import annotations

import dis
import hashlib
import inspect
import json
import os
import pickle
import secrets
import shutil
import sys
import tempfile
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path

from trainctl.errors import InvalidArgument
from trainctl.frameworks import Framework
from trainctl.functions import runner

FUNCTION_ANNOTATION = "trainctl.io/function"  # on a function job: module:qualname of its function
RUNNER_FILE = "trainctl_function.py"
# In a cluster's code snapshot: under .trainctl/, which a project's own tree never ships (trainctl.code.ignore),
# relative to the working directory the snapshot is unpacked into.
SNAPSHOT_DIR = ".trainctl/function"
SNAPSHOT_RUNNER = f"{SNAPSHOT_DIR}/{RUNNER_FILE}"


class CannotShip(InvalidArgument):
    """The function (or what it needs) cannot travel to a replica; the message says why and what to do."""


@dataclass(frozen=True)
class Shipment:
    """The files that make a function a job's command."""

    files: dict[str, bytes]
    function: str  # module:qualname, for people (annotations, messages)

    @property
    def digest(self) -> str:
        """Names the directory of the files; the random submission id in them makes it one per submission."""
        sha = hashlib.sha256()
        for name in sorted(self.files):
            sha.update(name.encode() + b"\0" + hashlib.sha256(self.files[name]).digest())
        return sha.hexdigest()[:24]


def ship(func: object, args: dict | None, framework: Framework, pickle_result: bool = False) -> Shipment:
    """Everything a replica needs to call ``func(**args)``; :class:`CannotShip` if it cannot travel.
    ``pickle_result``: rank 0 prints its return value pickled, not as data (trainctl.functions.runner).
    The framework tells the runner how its processes know their rank (call.json's ``launch``)."""
    function = plain_function(func)
    args = checked_args(function, args)
    if function.__module__ == "__main__":
        source, filename, imports, values = main_sources(function)
    else:
        source, filename, imports, values = module_source(function), module_filename(function), {}, {}
    call = {"kind": framework.kind, "launch": framework.function_launch.as_call(), "module": function.__module__, "qualname": function.__qualname__, "filename": filename,
            "source": source, "imports": imports, "pickle_result": pickle_result,
            "submission": secrets.token_hex(8),  # no secret: two runs of one call get directories of their own
            "package": getattr(sys.modules[function.__module__], "__package__", None)}  # for relative imports
    files = {RUNNER_FILE: Path(runner.__file__).read_bytes(),
             runner.CALL_FILE: json.dumps(call, indent=1).encode(),
             runner.GLOBALS_FILE: pickle.dumps(values, protocol=4),
             runner.ARGS_FILE: pickled(args, "args")}
    return Shipment(files, f"{function.__module__}:{function.__qualname__}")


def plain_function(func: object) -> types.FunctionType:
    """``func`` if it is a top-level ``def``; otherwise why not, and what to write instead."""
    hint = "define it with def at the top level of a module or notebook cell, and pass values through args="
    if isinstance(func, types.MethodType):
        raise CannotShip(f"run() cannot ship the method {func.__qualname__}: {hint}")
    if not isinstance(func, types.FunctionType):
        raise CannotShip(f"run() ships a plain function or a command list; got {type(func).__name__} {func!r}")
    if func.__name__ == "<lambda>":
        raise CannotShip(f"run() cannot ship a lambda (its source is part of another expression): {hint}")
    if ("<locals>" in func.__qualname__ or func.__closure__) and not reachable(func):
        raise CannotShip(f"run() cannot ship {func.__qualname__}: it is defined inside another function, whose "
                         f"variables a replica cannot rebuild; {hint}")
    if func.__code__.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        what = "a generator" if inspect.isgeneratorfunction(func) else "an async"
        raise CannotShip(f"run() cannot ship {func.__qualname__}: it is {what} function, whose call returns "
                         "before its body runs; write a plain def that runs it to the end (list(...) or "
                         "asyncio.run(...)) and returns the value")
    return func


def reachable(func: types.FunctionType) -> bool:
    """Whether ``func`` is what its module's top level names by its qualified name: then the replica finds it
    there, whatever it closes over (a decorator's wrapper, rebuilt by running the module's source)."""
    target: object = sys.modules.get(func.__module__)
    for part in func.__qualname__.split("."):
        target = getattr(target, part, None)
    return target is func


def checked_args(func: types.FunctionType, args: dict | None) -> dict:
    """``args`` as keyword arguments ``func`` accepts (a missing or unknown name fails here, not in every replica)."""
    args = {} if args is None else args
    if not isinstance(args, dict) or not all(isinstance(key, str) for key in args):
        raise CannotShip(f"args={args!r}: pass a dict of keyword arguments, e.g. args={{'lr': 0.1}}")
    try:
        inspect.signature(func).bind(**args)
    except TypeError as error:
        raise CannotShip(f"args: {func.__name__}() cannot be called with {sorted(args)}: {error}") from None
    return args


def pickled(value: object, what: str) -> bytes:
    try:
        return pickle.dumps(value, protocol=4)
    except Exception as error:  # pickling raises PicklingError, TypeError, AttributeError ... by object
        raise CannotShip(f"{what} cannot be pickled ({type(error).__name__}: {error}): pass plain values "
                         "(numbers, strings, lists, dicts, objects of importable classes)") from None


def source_of(obj: object) -> str:
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        raise CannotShip(f"the source of {obj.__module__}.{obj.__qualname__} is not available (typed at a bare "
                         "python prompt, compiled, or a class of a notebook cell before Python 3.13): define it "
                         "in a module file") from None


def module_source(func: types.FunctionType) -> str:
    return source_of(sys.modules[func.__module__])


def module_filename(func: types.FunctionType) -> str:
    return inspect.getsourcefile(sys.modules[func.__module__]) or func.__code__.co_filename


# ---- functions of __main__: the function's source and what it names ----------------------------

def main_sources(func: types.FunctionType) -> tuple[str, str, dict[str, str], dict[str, bytes]]:
    """(source, filename, imports, values) for a function of ``__main__``: see the module docstring."""
    namespace = func.__globals__
    sources: list[str] = []
    imports: dict[str, str] = {}
    values: dict[str, bytes] = {}
    seen: set[str] = set()

    def visit(obj: object) -> None:  # dependencies first, so a base class is defined before its subclass
        text = source_of(obj)
        for name in referenced_names(text):
            if name in seen or name not in namespace:
                continue  # a builtin, a local of its own, or already handled
            seen.add(name)
            take(name, namespace[name])
        sources.append(text)

    def take(name: str, value: object) -> None:
        if isinstance(value, types.ModuleType):
            imports[name] = value.__name__
        elif isinstance(value, (types.FunctionType, type)) and value.__module__ == "__main__":
            if isinstance(value, types.FunctionType):
                plain_function(value)
            visit(value)
        else:  # each pickled alone: the replica loads one that needs a shipped class after the sources ran
            values[name] = pickled(value, f"the global {name!r} ({type(value).__name__}) that {func.__name__} uses")

    seen.add(func.__name__)
    visit(func)
    return "\n\n".join(sources), f"<{func.__name__} from __main__>", imports, values


def referenced_names(source: str) -> set[str]:
    """Every global name the code of ``source`` reads: its bodies, decorators, defaults and bases."""
    names: set[str] = set()
    pending = [compile(source, "<source>", "exec")]
    while pending:
        code = pending.pop()
        names.update(i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME"))
        pending += [const for const in code.co_consts if isinstance(const, types.CodeType)]
    return names


# ---- where the files go ----------------------------------------------------------------------

def command(framework: Framework, python: str, runner_path: str, options: dict) -> list[str]:
    """The replica's command: the runner under the launcher its kind needs (``options``: the kind's own)."""
    return framework.function_command(python, runner_path, options)


def snapshot_files(shipment: Shipment) -> dict[str, bytes]:
    """The files as they travel in a cluster's code snapshot (the working directory's, plus these)."""
    return {f"{SNAPSHOT_DIR}/{name}": data for name, data in shipment.files.items()}


def place_locally(shipment: Shipment, root: Path) -> Path:
    """Write the files under ``root/<digest>/``, whole or not at all (a draft renamed into place); returns it."""
    directory = root / shipment.digest
    root.mkdir(parents=True, exist_ok=True)
    draft = Path(tempfile.mkdtemp(prefix=".draft-", dir=root))
    try:
        for name, data in shipment.files.items():
            (draft / name).write_bytes(data)
        os.replace(draft, directory)
    except BaseException:
        shutil.rmtree(draft, ignore_errors=True)
        raise
    return directory


def remove_placed(resource: object, root: Path) -> None:
    """Remove what :func:`place_locally` wrote for a local job, once the job is gone: the directory under
    ``root`` whose runner its commands name. Only a direct child of ``root`` is ever removed."""
    root = root.resolve()
    for word in command_words(resource):
        path = Path(word)
        if path.name == RUNNER_FILE and path.is_absolute() and path.parent.resolve().parent == root:
            shutil.rmtree(path.parent.resolve(), ignore_errors=True)


def command_words(resource: object) -> list[str]:
    """Every word of every container command of a job resource (a TrainJob's: its trainer's), read defensively (it
    may be damaged)."""
    def mapping(value: object) -> dict:
        return value if isinstance(value, dict) else {}

    trainer = mapping(mapping(mapping(resource).get("spec")).get("trainer")).get("command")
    words = [str(word) for word in trainer] if isinstance(trainer, list) else []
    for key, specs in mapping(mapping(resource).get("spec")).items():
        for replica in mapping(specs).values() if key.endswith("ReplicaSpecs") else ():
            for container in mapping(mapping(mapping(replica).get("template")).get("spec")).get("containers") or ():
                command = mapping(container).get("command")
                words += [str(word) for word in command] if isinstance(command, list) else []
    return words
