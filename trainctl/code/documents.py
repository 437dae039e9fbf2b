"""Snapshots read back from the ConfigMaps ``submit --dry-run`` printed, for ``trainctl apply -f``.

``submit --dry-run > job.yaml`` then ``trainctl apply -f job.yaml`` must do what the submit would
have done: upload the snapshot (or reuse it) and make each job its owner. So apply takes the
snapshot ConfigMaps out of the documents, joins their chunks, checks the joined archive against
the hash they carry, and hands each job the snapshot its annotations name. A chunk missing or
edited is one line, before anything is applied.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io

from trainctl.code import unpack
from trainctl.code.archive import Archive
from trainctl.code.pods import CHUNK_KEY, DIGEST, LABEL_SNAPSHOT, SOURCE, CodeRequest
from trainctl.code.snapshot import Snapshot
from trainctl.errors import UserError


def is_snapshot_map(document: object) -> bool:
    if not isinstance(document, dict) or document.get("kind") != "ConfigMap" or document.get("apiVersion") != "v1":
        return False
    metadata = document.get("metadata")
    return isinstance(metadata, dict) and LABEL_SNAPSHOT in (metadata.get("labels") or {})


def split(documents: list, where: str) -> tuple[list, dict[str, bytes]]:
    """The documents that are not snapshot ConfigMaps, and each snapshot's archive by its digest."""
    chunks: dict[str, list[tuple[int, bytes]]] = {}
    rest = []
    for document in documents:
        if not is_snapshot_map(document):
            rest.append(document)
            continue
        name = str(document["metadata"].get("name"))
        try:
            digest = document["metadata"]["annotations"][DIGEST]
            index = int(name.rsplit("-", 1)[1])
            data = base64.b64decode(document["binaryData"][CHUNK_KEY], validate=True)
        except (KeyError, TypeError, IndexError, ValueError, binascii.Error):
            raise UserError(f"{where}: ConfigMap {name!r} is not a code snapshot chunk as submit --dry-run prints "
                            "one: print it again") from None
        chunks.setdefault(str(digest), []).append((index, data))
    archives = {}
    for digest, parts in chunks.items():
        archive = b"".join(data for _, data in sorted(parts))
        if f"sha256:{hashlib.sha256(archive).hexdigest()}" != digest:
            raise UserError(f"{where}: the ConfigMaps of code snapshot {digest[:19]} do not hold it (a chunk is "
                            "missing or was edited): print them again with submit --dry-run")
        archives[digest] = archive
    return rest, archives


def code_for(job: dict, archives: dict[str, bytes]) -> CodeRequest | None:
    """The snapshot a job's annotations name, when the file holds it; None otherwise (its ConfigMaps
    may be in the cluster already: the job then only refers to them)."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    archive = archives.get(annotations.get(DIGEST))
    if archive is None:
        return None
    try:  # the hash proves only that the chunks are whole, not who made them: the unpacker's limits apply
        files, size = unpack.survey(io.BytesIO(archive))
    except unpack.ERRORS as err:
        raise UserError(f"code snapshot {annotations[DIGEST][:19]}: not a snapshot trainctl can unpack ({err}): "
                        "print it again with submit --dry-run") from None
    snapshot = Snapshot(annotations.get(SOURCE, "-"), Archive.of(archive), annotations[DIGEST], files, size)
    return CodeRequest(snapshot)
