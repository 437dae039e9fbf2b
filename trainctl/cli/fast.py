"""The ``trainctl`` entry point: the commands people run in loops start without typer or Rich.

``trainctl status``, ``get``, ``list``, ``logs`` and ``wait`` are what scripts, ``watch`` and shell
loops run, and they are held against ``kubectl get`` (docs/benchmarks.md). Building the Typer app
costs more than such a command's own work, so when one of them prints where there is no terminal
(Rich would show nothing of its own there) its line is parsed here, from the same declarations typer
reads (cli/params.py), and the same command function runs, printing through cli/plain.py.

Anything this parser does not take for certain goes to the Typer app, which has the last word on
every line: ``--help``, an unknown or grouped option, a value that fails its check, a missing
argument, ``--``, shell completion, a terminal. So every error and every help text is typer's, and a
line is never read two ways.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable

from trainctl.cli.plain import is_plain

# command -> (module under trainctl.cli, function, the streams that must be no terminal: wait's spinner is on stderr)
COMMANDS = {"status": ("status", "status", ("stdout",)), "get": ("status", "status", ("stdout",)),
            "list": ("status", "list_jobs", ("stdout",)), "logs": ("logs", "logs", ("stdout",)),
            "wait": ("wait", "wait", ("stdout", "stderr"))}
# what of a declaration this parser honours; one with more (envvar, min, max ...) leaves its command to typer
PARSED_SETTINGS = {"help", "callback", "autocompletion", "metavar", "show_default"}


def main() -> None:
    """Run the command line: here when :func:`fast_command` takes it, else through the Typer app."""
    from trainctl.errors import CLI, speaking

    with speaking(CLI):
        command = fast_command(sys.argv[1:])
        if command is None:
            from trainctl.cli.app import run_app

            run_app()
        from trainctl.cli.common import finish

        code = finish(command)
    leave(code)


def leave(code: int) -> None:
    """Exit with ``code``, without the interpreter's teardown when nothing needs it: with no thread left running,
    what a normal exit does that matters is the atexit functions and flushing the output, both done here; freeing
    the hundred-odd modules a cluster read loads one by one took some 10 ms, an eighth of a ``status``
    (docs/benchmarks.md, CLI latency). A thread still running gets the normal exit, which waits for it."""
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        raise SystemExit(code)
    import atexit

    atexit._run_exitfuncs()  # CPython's own, as at a normal exit (the name is private, the behaviour documented)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # `trainctl list | head`: the reader has all it wanted
            pass
        except (OSError, ValueError):  # a full disk, a closed stream: the status a normal exit would give
            code = code or 120
    os._exit(code)


def fast_command(argv: list[str]) -> Callable[[], object] | None:
    """The call that runs ``argv`` as its command function would under typer, or None: typer's to read."""
    if not argv or argv[0] not in COMMANDS or os.environ.get("_TRAINCTL_COMPLETE"):
        return None
    module, function_name, streams = COMMANDS[argv[0]]
    if not all(is_plain(getattr(sys, stream)) for stream in streams):
        return None
    from trainctl.cli.arguments import ESCAPED_BYTE
    from trainctl.cli.params import parameters

    if any(not arg.isascii() and re.search(ESCAPED_BYTE, arg) for arg in argv):
        return None  # not UTF-8: typer's path says which argument
    function = getattr(importlib.import_module(f"trainctl.cli.{module}"), function_name)
    declared = parameters(function)
    if declared is None or any(set(p.declared.settings) - PARSED_SETTINGS for p in declared):
        return None
    values = parse(declared, argv[1:])
    if values is None or not checked(declared, values):
        return None
    return lambda: function(**values)


def parse(declared: list, args: list[str]) -> dict | None:
    """The values of ``declared`` parameters (cli.params.Parameter) given by ``args``, defaults for the rest;
    None for anything but ``--long``, ``--long=value``, ``-s``, ``-s value`` and arguments."""
    options = {name: param for param in declared for name in param.declared.names}
    values, words, rest = {}, [], iter(args)
    for arg in rest:
        if not arg.startswith("-") or arg == "-":
            words.append(arg)
            continue
        name, has_value, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        param = options.get(name)
        if param is None or (param.kind is bool and has_value):
            return None
        if param.kind is bool:
            values[param.name] = True
            continue
        if not has_value:
            value = next(rest, None)
            if value is None or value.startswith("-"):
                return None
        if not store(values, param, value):
            return None
    if not arguments(declared, words, values):
        return None
    for param in declared:
        values.setdefault(param.name, param.default)
    if any(value is ... for value in values.values()):
        return None  # a required argument missing
    return values


def store(values: dict, param, value: str) -> bool:
    """Take an option's value as typer's conversion would (cli/coercion.py); False where it would refuse it."""
    if param.kind is list:
        values.setdefault(param.name, []).append(value)
    elif param.kind is int:
        try:
            values[param.name] = int(value)
        except ValueError:
            return False
    else:
        values[param.name] = value
    return True


def arguments(declared: list, words: list[str], values: dict) -> bool:
    """Hand out the words that are no option to the command's arguments; False if they do not fit."""
    for param in [p for p in declared if not p.declared.names]:
        if param.kind is list:
            if words:
                values[param.name], words = words, []
        elif words:
            values[param.name] = words.pop(0)
    return not words


def checked(declared: list, values: dict) -> bool:
    """Run each value's check (its callback) as typer would; False when one refuses it (typer then says why)."""
    from trainctl.errors import UserError

    try:
        for param in declared:
            check = param.declared.settings.get("callback")
            if check is not None:
                values[param.name] = check(values[param.name])
    except UserError:
        return False
    return True
