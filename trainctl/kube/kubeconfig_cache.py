"""The kubeconfig context a command used, kept parsed for the next command (JSON instead of YAML).

Importing PyYAML and parsing a kubeconfig costs a command about 10 ms, an eighth of ``trainctl list``
against a cluster (docs/benchmarks.md). What a command needs of the file, the chosen context with
its cluster and user entries, is kept here after the first read and read back as JSON, which the
REST client loads anyway.

The entry holds what the kubeconfig holds for that context, credentials included (a token, a client
key), so it is kept as carefully as kubectl keeps the kubeconfig, or more:

* it is written only into a directory of this user's, mode 0700 (refused if it is anyone else's or
  more open), as a file of mode 0600 made under a temporary name and renamed into place, and read
  only when it is still this user's with mode 0600, not through a link;
* it holds one context's entries, not the whole file, and no token an exec plugin made (plugins
  run on every command, as before);
* it is used only while the kubeconfig is the very file it was read from: same device, inode, size,
  modification and change times (any edit, chmod or replacement reads the file again);
* entries not written for a week are removed when another is written;
* ``TRAINCTL_KUBECONFIG_CACHE=off`` turns it off. It lives under ``$TRAINCTL_HOME/cache`` when that
  is set, else ``$XDG_CACHE_HOME/trainctl``, else ``~/.cache/trainctl``: ``kubeconfig/<sha256>.json``.

Any problem reading or writing it (a full disk, a damaged or foreign file) only means the kubeconfig
is read as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600
STALE_S = 7 * 86400  # entries not written for a week go when another is written (kubeconfigs come and go)


def cache_dir() -> Path:
    if os.environ.get("TRAINCTL_HOME"):
        return Path(os.environ["TRAINCTL_HOME"]).absolute() / "cache" / "kubeconfig"
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "trainctl" / "kubeconfig"


def enabled() -> bool:
    return os.environ.get("TRAINCTL_KUBECONFIG_CACHE", "").lower() not in ("off", "0", "false", "no")


def entry_path(kubeconfig: Path, context: str | None) -> Path:
    key = f"{os.path.realpath(kubeconfig)}\0{context or ''}".encode("utf-8", "surrogateescape")
    return cache_dir() / f"{hashlib.sha256(key).hexdigest()}.json"


def fingerprint(kubeconfig: Path) -> list[int] | None:
    try:
        status = os.stat(kubeconfig)
    except OSError:
        return None
    return [status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns]


def read(kubeconfig: Path, context: str | None) -> dict | None:
    """The chosen context as :func:`trainctl.kube.config.chosen_context` returned it, if kept for this very file."""
    if not enabled():
        return None
    try:
        descriptor = os.open(entry_path(kubeconfig, context), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        status = os.fstat(descriptor)
        if status.st_uid != os.geteuid() or stat.S_IMODE(status.st_mode) != PRIVATE_FILE:
            return None
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            entry = json.loads(handle.read())
    except (OSError, ValueError):
        return None
    finally:
        os.close(descriptor)
    if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint(kubeconfig):
        return None
    return entry.get("chosen")


def write(kubeconfig: Path, context: str | None, chosen: dict, stamp: list[int] | None) -> None:
    """Keep ``chosen``, read from the file whose :func:`fingerprint` was ``stamp`` before it was read, for the
    next command; nothing (and no error) where it cannot be kept safely."""
    if not enabled() or stamp is None or not same_as_json(chosen):
        return
    folder = cache_dir()
    target = entry_path(kubeconfig, context)
    temporary = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        folder.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        status = os.lstat(folder)
        if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or stat.S_IMODE(status.st_mode) & 0o077:
            return  # not a private directory of this user's
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE)
        with os.fdopen(descriptor, "w") as handle:
            os.fchmod(descriptor, PRIVATE_FILE)  # whatever the umask made of it
            json.dump({"fingerprint": stamp, "chosen": chosen}, handle)
        os.replace(temporary, target)
        forget_stale(folder, target)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def same_as_json(chosen: dict) -> bool:
    """Whether ``chosen`` comes back from JSON as it is: a YAML date, a number as a key or a recursive alias
    would not, and such a kubeconfig is read from the file every time."""
    try:
        return json.loads(json.dumps(chosen)) == chosen
    except (TypeError, ValueError, RecursionError):
        return False


def forget_stale(folder: Path, kept: Path) -> None:
    """Remove the entries written more than :data:`STALE_S` ago (a kubeconfig deleted long since, a test
    cluster's): one that is still used is simply written again on its next read."""
    import time

    for entry in folder.glob("*.json"):
        try:
            if entry != kept and time.time() - entry.lstat().st_mtime > STALE_S:
                entry.unlink()
        except OSError:
            pass
