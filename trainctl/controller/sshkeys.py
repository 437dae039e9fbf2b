"""A fresh SSH key pair for an MPI TrainJob's Secret ``<job>-mpi-ssh-auth`` (docs/trainer-v2.md, "The SSH keys").

An Ed25519 pair in OpenSSH's own formats: the private key as ``ssh-keygen`` writes it (``openssh-key-v1``,
unencrypted), the public key as an ``authorized_keys`` line. Made with the standard library alone, so that the
controller image keeps its four small dependencies: the secret is the seed from :mod:`secrets`; deriving the public
key from it is the curve arithmetic of RFC 8032 §5.1.5 (key generation only: nothing here signs, so no operation
depends on secret data at a time anyone can observe). tests/unit/test_sshkeys.py checks the pairs against OpenSSH
and the ``cryptography`` package.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import struct

KEY_TYPE = b"ssh-ed25519"
_P = 2**255 - 19  # the field of edwards25519
_D = -121665 * pow(121666, -1, _P) % _P


def _x_of(y: int) -> int:
    """The even x of the curve's point with this y (RFC 8032 §5.1.3)."""
    u, v = (y * y - 1) % _P, (_D * y * y + 1) % _P
    x = u * pow(v, 3, _P) * pow(u * pow(v, 7, _P), (_P - 5) // 8, _P) % _P
    if (v * x * x - u) % _P:
        x = x * pow(2, (_P - 1) // 4, _P) % _P
    return _P - x if x & 1 else x


_BASE_Y = 4 * pow(5, -1, _P) % _P
_BASE = (_x_of(_BASE_Y), _BASE_Y, 1, _x_of(_BASE_Y) * _BASE_Y % _P)  # extended coordinates (X, Y, Z, T)


def _add(p: tuple[int, int, int, int], q: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    a, b = (p[1] - p[0]) * (q[1] - q[0]) % _P, (p[1] + p[0]) * (q[1] + q[0]) % _P
    c, d = 2 * p[3] * q[3] * _D % _P, 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def _times_base(scalar: int) -> tuple[int, int, int, int]:
    point, found = _BASE, (0, 1, 1, 0)
    while scalar:
        if scalar & 1:
            found = _add(found, point)
        point, scalar = _add(point, point), scalar >> 1
    return found


def public_key(seed: bytes) -> bytes:
    """The 32-byte Ed25519 public key of a 32-byte secret ``seed`` (RFC 8032 §5.1.5)."""
    digest = hashlib.sha512(seed).digest()
    scalar = int.from_bytes(digest[:32], "little") & ((1 << 254) - 8) | (1 << 254)
    x, y, z, _ = _times_base(scalar)
    inverse = pow(z, -1, _P)
    x, y = x * inverse % _P, y * inverse % _P
    return (y | (x & 1) << 255).to_bytes(32, "little")


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def key_pair(seed: bytes | None = None) -> tuple[str, str]:
    """(private key file, ``authorized_keys`` line) of a new pair, or of the pair of ``seed``."""
    seed = secrets.token_bytes(32) if seed is None else seed
    public = public_key(seed)
    blob = _string(KEY_TYPE) + _string(public)
    check = secrets.token_bytes(4)
    private = check + check + blob + _string(seed + public) + _string(b"")
    private += bytes(range(1, 1 + (-len(private)) % 8))  # padded to the cipher "none"'s block of 8
    body = (b"openssh-key-v1\0" + _string(b"none") + _string(b"none") + _string(b"") + struct.pack(">I", 1)
            + _string(blob) + _string(private))
    armored = base64.b64encode(body).decode()
    lines = "\n".join(armored[start:start + 70] for start in range(0, len(armored), 70))
    return (f"-----BEGIN OPENSSH PRIVATE KEY-----\n{lines}\n-----END OPENSSH PRIVATE KEY-----\n",
            f"{KEY_TYPE.decode()} {base64.b64encode(blob).decode()}\n")


__all__ = ["key_pair", "public_key"]
