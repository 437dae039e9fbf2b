"""Files that hold credentials, held back from every snapshot unless the submitter names each one.

A snapshot lands in ConfigMaps, which anyone allowed to read ConfigMaps in the namespace can read,
and in every pod. A working directory often holds a ``.env``, a key or a kubeconfig that git
ignores for exactly that reason, and a ``.gitignore`` can be missing, or a subdirectory shipped
without it. So whatever the ignore files say, a file whose path matches :data:`DENY_LIST`
(gitignore syntax, matched against the path in the snapshot) or whose content is a Google Cloud
key (:func:`key_by_content`, only for ``.json`` files, from their first :data:`CONTENT_PREFIX`
bytes) stays home, and the snapshot's warning names it. ``--ship-secret PATH`` (``ship_secret=``
in the Python API) sends one such file on purpose: a path, never a pattern, given with the submit
that needs it rather than in a file committed with the code (docs/code-shipping.md says why).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from trainctl.code import ignore, regular

# One gitignore pattern a line; a later "!" line re-includes (templates such as .env.example hold no secret).
DENY_LIST = """
.env
.env.*
!.env.example
!.env.sample
!.env.template
!.env.dist
.envrc
id_rsa
id_dsa
id_ecdsa
id_ecdsa_sk
id_ed25519
id_ed25519_sk
*.pem
*.key
*.p12
*.pfx
*.jks
*.keystore
*.ppk
**/.ssh/**
**/.gnupg/**
**/.aws/**
**/.azure/**
**/.config/gcloud/**
application_default_credentials.json
client_secret*.json
.netrc
_netrc
.git-credentials
**/.kube/config
kubeconfig
kubeconfig.*
*.kubeconfig
.pypirc
.npmrc
.yarnrc.yml
**/.docker/config.json
.dockercfg
**/.cargo/credentials
**/.cargo/credentials.toml
**/.gem/credentials
secrets.toml
*.tfstate
*.tfstate.backup
*.tfvars
.terraformrc
terraform.rc
**/huggingface/token
**/.huggingface/token
**/huggingface/stored_tokens
**/.kaggle/kaggle.json
.databrickscfg
.vault-token
.pgpass
.my.cnf
.s3cfg
.boto
.htpasswd
.*_history
"""
CONTENT_PREFIX = 64 * 1024  # a service-account key is about 2.3 KiB; reading more would only cost time
# JSON "type" of a Google credential file -> the field that makes it a secret
KEY_TYPES = {b"service_account": b'"private_key"', b"authorized_user": b'"refresh_token"'}
KEY_TYPE = re.compile(rb'"type"\s*:\s*"(' + b"|".join(KEY_TYPES) + rb')"')


@functools.cache
def rules() -> list[ignore.Rule]:
    return ignore.parse(DENY_LIST, "")


def by_name(relative: str) -> bool:
    """Whether the path ``relative`` (to the snapshot's root) names a credential-like file."""
    return ignore.ignored(rules(), relative, is_dir=False)


def key_by_content(path: Path) -> bool:
    """Whether ``path``, a .json file, is a Google Cloud service-account key or user credential (read
    from its first CONTENT_PREFIX bytes; a file that cannot be read is no key: packing it says why)."""
    if path.suffix.lower() != ".json":
        return False
    try:
        start = regular.read_prefix(path, CONTENT_PREFIX)
    except OSError:
        return False
    found = KEY_TYPE.search(start)
    return found is not None and KEY_TYPES[found.group(1)] in start


def credential_like(relative: str, path: Path) -> bool:
    return by_name(relative) or key_by_content(path)
