"""What every replica of a function job runs: ``python trainctl_function.py`` beside ``call.json``.

:mod:`trainctl.functions.shipping` writes this file's source next to the call it describes (the
function's module source, its name, the pickled arguments) and makes it the replica's
command. It must run where trainctl is not installed (a cluster image has only Python and
the framework), so it imports nothing but the standard library, and trainctl imports it
back for the few facts both sides share (the result line's format).

In the replica it builds the function's module from the shipped source (under the module's
own name, so pickled arguments that refer to its classes resolve), fills in the launcher
environment a script expects from its kind's launcher when none ran it (torchrun's ``LOCAL_RANK`` ...:
call.json's ``launch``, from the kind's framework),
calls ``func(**args)`` and, on rank 0 only, prints the return value as one line on stdout,
which the client reads back from the logs (``JobHandle.result``), the same way locally and
on a cluster. The line starts a line of its own (:func:`on_its_own_line`): what the function
printed last may not have ended its line (``print(..., end="")``, a progress bar's ``\r``, a
colour reset), and a result glued to it would be lost.

A log line can be written by anyone who can write the job (its resource, its files, any of its
replicas), so by default it carries data only: :data:`MARKER` and the value as JSON, with
tagged objects (``{"$tuple": [...]}``) for what JSON lacks: tuples, sets, bytes, dicts with
keys other than strings, NaN and infinities, numpy arrays and scalars of numbers, torch
tensors (through numpy). Decoding it builds those types and nothing else: no class is looked
up by name, no code runs. A job run with ``pickle_result=True`` prints :data:`PICKLE_MARKER`
and a pickle instead, for anything else; the client unpickles it only when its caller says
``result(allow_pickle=True)`` (docs/python-api.md: what result() trusts).

A function that raises leaves a record of it (:data:`RAISED_MARKER`, the exception line and the
time in nanoseconds) in the container's termination message, ``/dev/termination-log`` on
Kubernetes or the file the local supervisor names in :data:`TERMINATION_LOG_ENV`: the failure
summary and the Failed condition tell the replica that raised first from those that failed
because of it by that time (trainctl/core/attribution.py), as torchrun's ``@record`` does.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import importlib.util
import io
import json
import linecache
import math
import os
import pickle
import signal
import sys
import time
import traceback
import types
from pathlib import Path

MARKER = "trainctl-result:v2"  # then the value as tagged JSON (v1 lines were signed pickles: never read)
PICKLE_MARKER = "trainctl-result:pickle"  # then base64 of a pickle: only with pickle_result=True
MARKERS = "trainctl-result:"  # what every result line, of any version, starts with
# Encoded bytes of a return value: enough for metrics, a path, a small array; a model belongs in storage.
MAX_RESULT_BYTES = 1024 * 1024
CALL_FILE, GLOBALS_FILE, ARGS_FILE = "call.json", "globals.pickle", "args.pickle"
RAISED_MARKER = "trainctl-raised:v1"  # then JSON: {"time_ns", "exception", "rank"}, one line per raise
TERMINATION_LOG_ENV = "TRAINCTL_TERMINATION_LOG"  # set by the local supervisor: its stand-in for kubelet's file
KUBERNETES_TERMINATION_LOG = "/dev/termination-log"  # a container's default terminationMessagePath
MAX_RECORDED_CHARS = 500  # of the exception line: kubelet keeps 4096 bytes of a termination message
NUMERIC_DTYPE_KINDS = "biufc"  # bool, signed, unsigned, float, complex: raw bytes that are only numbers
NOT_DATA = ("return plain data (numbers, strings, lists, tuples, dicts, sets, bytes, numpy arrays or torch "
            "tensors of numbers), or run with pickle_result=True and read it with result(allow_pickle=True)")


class NotData(TypeError):
    """A return value (or a part of it) that the data-only result line cannot carry."""


def result_line(value: object, pickle_result: bool = False) -> str:
    """The line rank 0 prints for ``value``; :class:`NotData` or ValueError (too big) naming what to do."""
    if pickle_result:
        payload = pickle.dumps(value, protocol=4)  # 4: readable by every Python trainctl supports
        line = f"{PICKLE_MARKER} {base64.b64encode(payload).decode()}"
    else:
        line = f"{MARKER} {json.dumps(encoded(value, 'the return value'), allow_nan=False)}"
    if len(line) > MAX_RESULT_BYTES:
        raise ValueError(f"the return value is {len(line):,} bytes encoded, more than the {MAX_RESULT_BYTES:,} "
                         "a result may have: save it to storage and return its path")
    return line


def encoded(value: object, where: str) -> object:
    """``value`` as JSON-ready data, tagged where JSON has no such type; ``where`` names it in errors."""
    if value is None or type(value) in (bool, int, str):  # exactly: a subclass (an enum) would lose its type
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if type(value) is list:
        return [encoded(item, f"{where}[{index}]") for index, item in enumerate(value)]
    if type(value) in (tuple, set, frozenset):
        return {f"${type(value).__name__}": [encoded(item, f"an item of {where}") for item in value]}
    if type(value) is dict:
        return {"$dict": [[encoded(key, f"a key of {where}"), encoded(item, f"{where}[{key!r}]")]
                          for key, item in value.items()]}
    if type(value) is bytes:
        return {"$bytes": base64.b64encode(value).decode()}
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, (numpy.ndarray, numpy.generic)):
        return {"$numpy": numpy_data(numpy.asarray(value), where), "scalar": isinstance(value, numpy.generic)}
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        try:
            array = value.detach().cpu().numpy()
        except (TypeError, RuntimeError) as error:  # bfloat16 has no numpy type
            raise NotData(f"{where} is a torch tensor numpy cannot hold ({error}): convert it, or "
                          + NOT_DATA) from None
        return {"$torch": numpy_data(array, where)}
    raise NotData(f"{where} is a {type(value).__module__}.{type(value).__qualname__}: {NOT_DATA}")


def numpy_data(array, where: str) -> dict:
    if array.dtype.kind not in NUMERIC_DTYPE_KINDS:
        raise NotData(f"{where} is a numpy array of {array.dtype}, not of numbers: {NOT_DATA}")
    return {"dtype": array.dtype.str, "shape": list(array.shape),
            "data": base64.b64encode(array.tobytes(order="C")).decode()}


def on_its_own_line(line: str) -> str:
    """What rank 0 writes for a result line: a newline first ends whatever line the function left open (the
    reader drops the empty line this makes after a finished one: trainctl.functions.results.without_plumbing)."""
    return f"\n{line}\n"


def print_result(line: str) -> None:
    """Write the result line to the process's stdout after what the function left in its streams' buffers."""
    for stream in (sys.stderr, sys.stdout):  # the function's own, which it may have replaced or closed
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.flush()
    sys.__stdout__.write(on_its_own_line(line))
    sys.__stdout__.flush()


def is_rank_zero(launch: dict, env: os._Environ | dict) -> bool:
    """Whether this process is the job's rank 0, by the rule its kind's framework shipped in call.json:
    the first rank variable set, or rank 0 of a cluster spec (see trainctl.frameworks.base.FunctionLaunch)."""
    if launch.get("cluster_spec"):
        return cluster_rank_zero(env.get(launch["cluster_spec"]), launch.get("leader_tasks") or [])
    ranks = [env.get(name) for name in launch.get("rank_variables") or []]
    return bool(launch.get("rank_variables")) and next((rank for rank in ranks if rank is not None), "0") == "0"


def cluster_rank_zero(spec: str | None, leaders: list[str]) -> bool:
    """Index 0 of the first leader task the cluster has, else of the workers; a single replica has no spec."""
    if not spec:
        return True
    config = json.loads(spec)
    task, cluster = config.get("task") or {}, config.get("cluster") or {}
    leader = next((role for role in leaders if cluster.get(role)), "worker")
    return task.get("type") == leader and int(task.get("index", 0)) == 0


def launcher_env(launch: dict, env: os._Environ | dict) -> None:
    """What the kind's launcher would give each process (torchrun's LOCAL_RANK ...), unless a launcher did."""
    for name, default, source in launch.get("defaults") or []:
        env.setdefault(name, env.get(source, default) if source else default)


def load_module(call: dict, directory: Path) -> types.ModuleType:
    """The function's module, built from the shipped source under its own name.

    A function from ``__main__`` (a script or notebook) comes with only the sources it
    needs, and they become this process's ``__main__``: what it returns pickles as
    ``__main__.X``, which the notebook that reads the result has.
    """
    module = empty_module(call)
    later = set_globals(module, call, directory)
    exec(compile(call["source"], call["filename"], "exec"), module.__dict__)
    for global_name, data in later.items():
        setattr(module, global_name, pickle.loads(data))
    return module


def empty_module(call: dict) -> types.ModuleType:
    """The module, registered under its name, with its package and the source for tracebacks; no code run."""
    name, filename, source = call["module"], call["filename"], call["source"]
    module = types.ModuleType(name)
    module.__file__, module.__package__ = filename, call["package"]
    if call["package"] == name:  # a package's __init__: its submodules are where this replica finds the package
        found = importlib.util.find_spec(name)
        module.__path__ = list(found.submodule_search_locations or []) if found else []
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # tracebacks show lines
    sys.modules[name] = module
    return module


def set_globals(module: types.ModuleType, call: dict, directory: Path) -> dict[str, bytes]:
    """A __main__ function's imports and pickled globals, set before its sources run (their decorators and
    defaults may need them); returns those that need a class the sources define, to set after."""
    for alias, imported in call["imports"].items():
        setattr(module, alias, importlib.import_module(imported))
    later = {}
    for global_name, data in pickle.loads((directory / GLOBALS_FILE).read_bytes()).items():
        try:
            setattr(module, global_name, pickle.loads(data))
        except AttributeError:  # "Can't get attribute 'Config' on <module '__main__'>": not defined yet
            later[global_name] = data
    return later


def described(error: BaseException) -> str:
    """``ValueError: message`` as a traceback's last line says it; ``ValueError`` alone without a message."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def record_raise(error: BaseException, launch: dict) -> None:
    """Append what this process raised, and when, to the container's termination message (``launch``: call.json's,
    which says how this kind numbers the processes of a replica)."""
    first_line = described(error).splitlines()[0]
    record = {"time_ns": time.time_ns(), "exception": first_line[:MAX_RECORDED_CHARS],
              "rank": shared_rank(launch, os.environ)}
    local = os.environ.get(TERMINATION_LOG_ENV)
    # kubelet's file exists in every container; elsewhere nothing is created under /dev
    flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT if local else 0)
    try:
        handle = os.open(local or KUBERNETES_TERMINATION_LOG, flags, 0o644)
    except OSError:
        return  # no termination message here: the log's traceback still tells
    with os.fdopen(handle, "a") as out:
        out.write(f"{RAISED_MARKER} {json.dumps(record)}\n")


def shared_rank(launch: dict, env: os._Environ | dict) -> str | None:
    """This process's rank when its replica runs several (mpirun's ranks, torchrun's nproc_per_node), else None:
    launch's ``shared_rank`` names the kind's (rank, local size) variables."""
    rank, local_size = launch.get("shared_rank") or (None, None)
    size = env.get(local_size, "1") if local_size else "1"
    return env.get(rank) if size.isdigit() and int(size) > 1 else None


def abort_peers(launch: dict) -> None:
    """Under a launcher whose ranks wait for each other (mpirun's, in their next collective), end every rank, as
    ``python -m mpi4py`` does: a rank that only exits leaves the job running for ever. launch's ``abort_module``
    is the kind's MPI module, when this process imported it."""
    mpi = sys.modules.get(launch.get("abort_module") or "")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() and mpi.COMM_WORLD.Get_size() > 1:
        sys.stderr.flush()
        mpi.COMM_WORLD.Abort(1)


def whole_lines() -> None:
    """Make each print one write. PYTHONUNBUFFERED (the operator's env) writes a line's text and its newline
    apart, so processes sharing one pipe (torchrun's local ranks) splice each other's lines; buffering a line
    until its newline keeps it whole (a pipe write under 4 KiB is atomic) and still flushes at every line."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(line_buffering=True, write_through=False)


def end_on_sigterm() -> None:
    """As its container's PID 1 (a pod of one process per replica runs the runner itself), a Python without a
    handler ignores SIGTERM, and every delete of the pod (``trainctl delete``, cleanPodPolicy, a restart, a
    suspend) waited out its grace period for the kubelet's SIGKILL. End as the signal would, with 128 + 15, after
    the function's ``finally`` blocks; a function that sets a handler of its own (to save a checkpoint) replaces
    this one. Elsewhere (a local process, a launcher's child) SIGTERM already ends it."""
    if os.getpid() == 1 and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def main(directory: Path) -> int:
    whole_lines()
    end_on_sigterm()
    call = json.loads((directory / CALL_FILE).read_text())
    sys.path.insert(0, os.getcwd())  # the job's working directory: the user's sibling modules
    launcher_env(call["launch"], os.environ)
    target = load_module(call, directory)
    for part in call["qualname"].split("."):
        target = getattr(target, part)
    args = pickle.loads((directory / ARGS_FILE).read_bytes())
    try:
        value = target(**args)
    except Exception as error:  # the job fails with the traceback and one line naming what was raised
        record_raise(error, call["launch"])
        traceback.print_exc()
        print(f"trainctl: {call['qualname']}() raised {described(error)}", file=sys.stderr, flush=True)
        abort_peers(call["launch"])
        return 1
    if not is_rank_zero(call["launch"], os.environ):
        return 0
    try:
        line = result_line(value, call["pickle_result"])
    except Exception as error:  # NotData, too big, or (pickle_result) anything pickle refuses: one line, no traceback
        print(f"trainctl: {call['qualname']}() returned what a result cannot carry: {error}", file=sys.stderr,
              flush=True)
        return 1
    print_result(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(__file__).resolve().parent))
