"""The init container's program: join the snapshot's chunks, check its hash, unpack it.

    python3 -c "<this file>" --chunks /trainctl/code-chunks --digest sha256:<hex> --into /workspace

It runs in the replica's own image, so it uses the standard library only and nothing of
trainctl; its source travels as one argument of the container's command (data, never
shell text). Chunks are the files of ``--chunks`` in name order (the projected ConfigMap
volume). Only regular files are unpacked, and only inside ``--into``: a member that
would land elsewhere (absolute, ``..``) or is a link fails the replica, as does a hash
that differs from ``--digest`` (a ConfigMap changed, or one chunk missing).
"""

import argparse
import hashlib
import io
import os
import sys
import tarfile
import zlib

PREFIX = "trainctl-unpack"


class Refused(Exception):
    pass


def joined(chunks_dir):
    names = sorted(name for name in os.listdir(chunks_dir) if not name.startswith("."))
    if not names:
        raise Refused(f"no chunks in {chunks_dir}")
    parts = []
    for name in names:
        with open(os.path.join(chunks_dir, name), "rb") as chunk:
            parts.append(chunk.read())
    return b"".join(parts)


def check(archive, digest):
    algorithm, _, expected = digest.partition(":")
    if algorithm != "sha256" or not expected:
        raise Refused(f"--digest {digest!r}: expected sha256:<hex>")
    actual = hashlib.sha256(archive).hexdigest()
    if actual != expected:
        raise Refused(f"the code snapshot's sha256 is {actual}, not {expected}: a ConfigMap of it was changed "
                      "or is missing a chunk; delete them (kubectl delete configmap -l "
                      f"trainctl.io/code-snapshot={expected[:20]}) and submit again to upload it anew")


def target_of(member, root):
    """Where ``member`` goes under ``root``; Refused when outside it, or when it is a link or device."""
    target = os.path.realpath(os.path.join(root, member.name))
    if os.path.isabs(member.name) or not target.startswith(root + os.sep):
        raise Refused(f"member {member.name!r} would land outside {root}")
    if not (member.isfile() or member.isdir()):
        raise Refused(f"member {member.name!r} is not a regular file")
    return target


def files_in(archive):
    """The regular files of ``archive`` (TarInfo), every member checked as :func:`extract` would."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        members = list(tar)
    for member in members:
        target_of(member, "/unpacked")
    return [member for member in members if member.isfile()]


def extract(archive, into):
    """Write every member of the tar.gz ``archive`` under ``into``; returns how many files."""
    root = os.path.realpath(into)
    count = 0
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            target = target_of(member, root)
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with tar.extractfile(member) as source, open(target, "wb") as out:
                out.write(source.read())
            os.chmod(target, member.mode & 0o755)
            count += 1
    return count


def main(argv=None):
    parser = argparse.ArgumentParser(prog=PREFIX)
    parser.add_argument("--chunks", required=True)
    parser.add_argument("--digest", required=True)
    parser.add_argument("--into", required=True)
    args = parser.parse_args(argv)
    try:
        archive = joined(args.chunks)
        check(archive, args.digest)
        count = extract(archive, args.into)
    except (Refused, OSError, EOFError, zlib.error, tarfile.TarError) as err:
        print(f"{PREFIX}: {err}", file=sys.stderr)
        return 1
    print(f"{PREFIX}: {count} files of {args.digest[:19]} in {args.into}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
