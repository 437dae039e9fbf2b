"""The SSH key pairs the controller makes for MPI TrainJobs (trainctl/controller/sshkeys.py): Ed25519 public keys
as RFC 8032's test vectors and the ``cryptography`` package derive them, private keys OpenSSH reads back to the
same public key, and a new secret every time."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainctl.controller.sshkeys import key_pair, public_key

# RFC 8032 §7.1, TEST 1 and TEST 2: (secret key, public key)
VECTORS = [("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"),
           ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c")]


@pytest.mark.parametrize(("secret", "public"), VECTORS)
def test_public_keys_are_rfc_8032s(secret, public):
    assert public_key(bytes.fromhex(secret)).hex() == public


@settings(max_examples=40, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32))
def test_the_private_key_file_reads_back_to_the_public_key(seed):
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    private, public = key_pair(seed)
    loaded = serialization.load_ssh_private_key(private.encode(), None)
    assert loaded.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                            serialization.PublicFormat.OpenSSH).decode() + "\n" == public


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="no ssh-keygen here")
def test_openssh_reads_the_private_key(tmp_path):
    private, public = key_pair()
    path = tmp_path / "id_rsa"  # the name upstream mounts it as; OpenSSH reads the key's type from its content
    path.write_text(private)
    path.chmod(0o600)
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True, check=True)
    assert derived.stdout.split()[:2] == public.split()[:2]


def test_every_pair_is_new():
    assert len({key_pair()[0] for _ in range(3)}) == 3
