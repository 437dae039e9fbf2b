"""The init container's program: join the snapshot's chunks, check its hash, unpack it.

    python3 -c "<this file>" --chunks /trainctl/code-chunks --digest sha256:<hex> --into /workspace [-- COMMAND...]

With a COMMAND (a TrainJob's node container, which has no init container of trainctl's: see
:func:`trainctl.code.pods.attach_trainjob`) it unpacks quietly, then runs COMMAND in ``--into`` in its place.

It runs in the replica's own image, so it uses the standard library only and nothing of
trainctl; its source travels as one argument of the container's command (data, never
shell text). Chunks are the files of ``--chunks`` in name order (the projected ConfigMap
volume), read as one stream and never held in memory. Three passes over them: the hash
(one that differs from ``--digest`` means a ConfigMap changed, or one chunk is missing);
the members, every one checked before anything is written; then the writing, 64 KiB at a
time, hashed again so that a chunk changed meanwhile fails the replica too. trainctl runs
the same checks locally (the local backend's ``--workdir``, ``apply -f``).

A member is refused, failing the replica, when it would land outside ``--into`` (absolute,
``..``), is anything but a regular file or a directory (a link, a device), or takes the
archive past :data:`MAX_FILES` members or :data:`MAX_BYTES` unpacked. Decompression is
bounded too: no tar header past :data:`BLOCK` bytes, no stream past :data:`MAX_STREAM`.
"""

import argparse
import gzip
import hashlib
import io
import os
import shutil
import sys
import tarfile
import zlib

PREFIX = "trainctl-unpack"
MAX_FILES = 50_000
MAX_BYTES = 256 << 20  # unpacked: what one code snapshot may write into a pod
BLOCK = 64 << 10  # the most read at once; a longer tar header (a PAX record, a GNU long name) is hostile
MAX_STREAM = MAX_BYTES + MAX_FILES * 4096 + (1 << 20)  # the files, a header and padding each, the end blocks
REGULAR = (tarfile.REGTYPE, tarfile.AREGTYPE)


class Refused(Exception):
    pass


# What a damaged or hostile archive raises while it is read: one line each, never a traceback
ERRORS = (Refused, OSError, EOFError, zlib.error, tarfile.TarError)


class Chunks(io.RawIOBase):
    """The chunk files of a directory, in name order, read as one stream and hashed as they are read."""

    def __init__(self, directory):
        names = sorted(name for name in os.listdir(directory) if not name.startswith("."))
        if not names:
            raise Refused(f"no chunks in {directory}")
        self.paths = [os.path.join(directory, name) for name in names]
        self.current = None
        self.sha256 = hashlib.sha256()

    def readable(self):
        return True

    def readinto(self, buffer):
        while self.paths or self.current:
            if self.current is None:
                self.current = open(self.paths.pop(0), "rb")
            count = self.current.readinto(buffer)
            if count:
                self.sha256.update(memoryview(buffer)[:count])
                return count
            self.current.close()
            self.current = None
        return 0

    def hexdigest(self):
        """The sha256 of every chunk, whole: what was not read yet is read now."""
        while self.read(BLOCK):
            pass
        return self.sha256.hexdigest()

    def close(self):
        if self.current:
            self.current.close()
        super().close()


class Bounded:
    """The decompressed archive as tarfile reads it, refusing what no snapshot holds: a single read past
    BLOCK (a header of megabytes, which tarfile would hold whole) or a position past MAX_STREAM."""

    def __init__(self, stream):
        self.stream = stream

    def read(self, size=-1):
        if not 0 <= size <= BLOCK:
            raise Refused(f"a tar header of {size:,} bytes: not an archive trainctl made")
        data = self.stream.read(size)
        self.check(self.stream.tell())
        return data

    def seek(self, offset, whence=os.SEEK_SET):
        self.check(offset if whence == os.SEEK_SET else self.stream.tell() + offset)
        return self.stream.seek(offset, whence)

    def tell(self):
        return self.stream.tell()

    def seekable(self):
        return True

    @staticmethod
    def check(position):
        if position > MAX_STREAM:
            raise Refused(f"the archive unpacks to more than {MAX_STREAM >> 20} MiB with its headers")


def check(actual, digest):
    algorithm, _, expected = digest.partition(":")
    if algorithm != "sha256" or not expected:
        raise Refused(f"--digest {digest!r}: expected sha256:<hex>")
    if actual != expected:
        raise Refused(f"the code snapshot's sha256 is {actual}, not {expected}: a ConfigMap of it was changed "
                      "or is missing a chunk; delete them (kubectl delete configmap -l "
                      f"trainctl.io/code-snapshot={expected[:20]}) and submit again to upload it anew")


def target_of(member, root):
    """Where ``member`` goes under ``root``; Refused when outside it, or when it is a link or device."""
    target = os.path.realpath(os.path.join(root, member.name))
    if os.path.isabs(member.name) or not target.startswith(root + os.sep):
        raise Refused(f"member {member.name!r} would land outside {root}")
    if member.type not in REGULAR and not member.isdir():
        raise Refused(f"member {member.name!r} is not a regular file")
    return target


def members(stream, root):
    """(tar, member, target) for each member of the tar.gz read from ``stream``, checked as it comes;
    Refused for a member past the limits."""
    try:
        with gzip.GzipFile(fileobj=stream, mode="rb") as unzipped, \
                tarfile.open(fileobj=Bounded(unzipped), mode="r:") as tar:
            count = size = 0
            while True:  # no walrus: the image's python3 may be older than 3.8
                member = tar.next()
                if member is None:
                    return
                tar.members.clear()  # tarfile keeps every member it read: 50,000 of them need not stay
                count, size = count + 1, size + member.size
                if count > MAX_FILES:
                    raise Refused(f"member {member.name!r} is past {MAX_FILES:,} members, the most a code snapshot "
                                  "holds")
                if size > MAX_BYTES:
                    raise Refused(f"member {member.name!r} ({member.size:,} bytes) takes the archive past "
                                  f"{MAX_BYTES >> 20} MiB unpacked, the most a code snapshot holds")
                yield tar, member, target_of(member, root)
    except RecursionError:  # tarfile follows a chain of PAX headers by recursion
        raise Refused("tar headers chained too deep to follow: not an archive trainctl made") from None


def survey(stream):
    """(files, bytes) of the tar.gz read from ``stream``: every member checked, nothing written."""
    files = size = 0
    for _, member, _ in members(stream, "/unpacked"):
        files, size = files + member.isfile(), size + member.size
    return files, size


def write(stream, into):
    """Write every member of the tar.gz read from ``stream`` under ``into``; returns how many files."""
    root = os.path.realpath(into)
    count = 0
    for tar, member, target in members(stream, root):
        if member.isdir():
            os.makedirs(target, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with tar.extractfile(member) as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out, BLOCK)
        os.chmod(target, member.mode & 0o755)
        count += 1
    return count


def extract(archive, into):
    """Unpack the tar.gz ``archive`` (bytes, or a seekable binary file) under ``into``, all of it checked
    first; returns how many files."""
    stream = io.BytesIO(archive) if isinstance(archive, (bytes, bytearray, memoryview)) else archive
    stream.seek(0)
    survey(stream)
    stream.seek(0)
    return write(stream, into)


def main(argv=None):
    parser = argparse.ArgumentParser(prog=PREFIX)
    parser.add_argument("--chunks", required=True)
    parser.add_argument("--digest", required=True)
    parser.add_argument("--into", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        with Chunks(args.chunks) as chunks:
            check(chunks.hexdigest(), args.digest)
        with Chunks(args.chunks) as chunks:
            survey(chunks)
        with Chunks(args.chunks) as chunks:
            count = write(chunks, args.into)
            check(chunks.hexdigest(), args.digest)
    except ERRORS as err:
        print(f"{PREFIX}: {err}", file=sys.stderr)
        return 1
    if not command:
        print(f"{PREFIX}: {count} files of {args.digest[:19]} in {args.into}")
        return 0
    return run_in(args.into, command)


def run_in(directory, command):
    """Run ``command`` in ``directory`` in this process's place; 127 when it cannot be run (as a shell says)."""
    os.chdir(directory)
    sys.stdout.flush()
    try:
        os.execvp(command[0], command)
    except OSError as err:
        print(f"{PREFIX}: cannot run {command[0]!r}: {err.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
