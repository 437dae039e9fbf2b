"""PID 1 of a local replica's own PID namespace, where no cgroup can hold the replica (see containment.py).

``python -I -S pidinit.py [--rename OLD=NEW] -- EXECUTABLE ARGV0 ARGS...`` (``--probe`` instead of a
command: exit 0 if a namespace can be entered here). A standalone script of the standard library, run
with -I -S, so it starts in milliseconds and nothing in the user's environment changes how it behaves.

A container runtime starts a pod's process as PID 1 of a PID namespace of its own; when that process
ends, the kernel kills every other process in the namespace, whatever each did to its session or its
environment. This gives a local replica the same:

1. it enters a new PID namespace (through a user namespace of its own, mapping only the user's uid and
   gid, when it is not root: that is what lets an unprivileged user create one);
2. it forks PID 1 of the namespace and stays behind as the process the supervisor started and waits
   for: it forwards every catchable signal to PID 1 and exits as PID 1 did;
3. PID 1 forks the command in a session of its own (default signal dispositions, the environment with
   ``--rename``'s variables renamed back), forwards signals to the command's process group, reaps the
   orphans that land on it, and exits with the command's status (128 + N when signal N killed it) once
   the command ends, and with that the kernel ends the rest of the namespace. PID 1 also dies with the
   process above it (PR_SET_PDEATHSIG), so a SIGKILL of the pid the supervisor knows ends it all too.
"""

import ctypes
import os
import signal
import sys

CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000
PR_SET_PDEATHSIG = 1
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
RUNTIME_FAILED = 125  # as docker run: the wrapper, not the command, failed
CANNOT_EXECUTE = 127


def main(args: list[str]) -> None:
    renames, probe, command = parse(args)
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        enter_namespaces(libc)
    except OSError as error:
        fail(f"cannot enter a PID namespace of its own: {error.strerror}")
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # held until each process has its handlers
    parent_end, child_end = os.pipe()
    init = os.fork()
    if init:
        os.close(parent_end)
        forward(lambda signum: os.kill(init, signum))
        os._exit(exit_code(os.waitpid(init, 0)[1]))
    os.close(child_end)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent_is_gone(parent_end):  # it died before prctl: the death signal would never come
        os._exit(128 + signal.SIGKILL)
    if probe:
        os._exit(0 if os.getpid() == 1 else 1)
    os.setsid()  # out of the supervisor's process group: its signals reach the command once, through us
    command_pid = os.fork()
    if command_pid == 0:
        execute(command, renamed(dict(os.environ), renames))
    forward(lambda signum: signal_group(command_pid, signum))
    os._exit(reap_until(command_pid))


def parse(args: list[str]) -> tuple[list[tuple[str, str]], bool, list[str]]:
    renames, probe = [], False
    while args and args[0] != "--":
        if args[0] == "--probe":
            probe, args = True, args[1:]
        elif args[0] == "--rename" and len(args) > 1 and "=" in args[1]:
            old, _, new = args[1].partition("=")
            renames.append((old, new))
            args = args[2:]
        else:
            fail(f"usage: pidinit.py [--rename OLD=NEW] [--probe] -- EXECUTABLE ARGV0 ARGS... (got {args[0]!r})")
    command = args[1:]
    if not probe and len(command) < 2:
        fail("no command after --")
    return renames, probe, command


def enter_namespaces(libc) -> None:
    """A new PID namespace: directly as root, else (or if that is refused) inside a new user namespace."""
    uid, gid = os.geteuid(), os.getegid()
    attempts = [CLONE_NEWPID, CLONE_NEWUSER | CLONE_NEWPID] if uid == 0 else [CLONE_NEWUSER | CLONE_NEWPID]
    for flags in attempts:
        if libc.unshare(flags) == 0:
            break
        error = ctypes.get_errno()
    else:
        raise OSError(error, os.strerror(error))
    if flags & CLONE_NEWUSER:  # the same uid and gid inside, so files and signals work as before
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)


def parent_is_gone(pipe_end: int) -> bool:
    """The process above us holds the pipe's other end open until it exits: end of file means gone."""
    os.set_blocking(pipe_end, False)
    try:
        gone = os.read(pipe_end, 1) == b""
    except BlockingIOError:
        gone = False
    os.close(pipe_end)
    return gone


def forward(send) -> None:
    for signum in FORWARDED:
        signal.signal(signum, lambda received, frame: send(received))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)


def signal_group(leader: int, signum: int) -> None:
    try:
        os.killpg(leader, signum)
    except ProcessLookupError:  # not yet a group leader (it calls setsid first thing), or gone
        try:
            os.kill(leader, signum)
        except ProcessLookupError:
            pass


def renamed(env: dict[str, str], renames: list[tuple[str, str]]) -> dict[str, str]:
    for old, new in renames:
        if old in env:
            env[new] = env.pop(old)
    return env


def execute(command: list[str], env: dict[str, str]) -> None:
    """Become the command, as a container's process starts: its own session, default signal handling."""
    os.setsid()
    for signum in (*FORWARDED, signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores the last two; exec keeps that
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    executable, argv = command[0], command[1:]
    try:
        os.execve(executable, argv, env)
    except OSError as error:
        os.write(2, f"trainctl: cannot start {argv[0]!r}: {error.strerror}\n".encode(errors="replace"))
    os._exit(CANNOT_EXECUTE)


def reap_until(command_pid: int) -> int:
    """As PID 1, wait for every process that ends here; the command's status once it is the one."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == command_pid:
            return exit_code(status)


def exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def fail(message: str) -> None:
    os.write(2, f"trainctl: {message}\n".encode(errors="replace"))
    os._exit(RUNTIME_FAILED)


if __name__ == "__main__":
    main(sys.argv[1:])
