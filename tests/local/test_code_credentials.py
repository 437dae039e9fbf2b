"""Issue 22's working directories, snapshot by snapshot: credential-like files stay home unless named one by
one (and one line names them), and the ignore rules and symlinks agree with git: a ``.gitignore`` saved with a
BOM, the repository's outer ``.gitignore`` and ``.git/info/exclude`` under ``--workdir sub``, and a link that
ships only what its target's own path would (``git ls-files --others --exclude-standard`` is the reference)."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.unit.test_code_snapshot import as_the_cli_speaks, names_in, tree  # noqa: F401 (an autouse fixture)
from trainctl.code import snapshot
from trainctl.errors import PYTHON, UserError, speaking

SERVICE_ACCOUNT = json.dumps({"type": "service_account", "project_id": "demo", "private_key_id": "0f1e",
                              "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQ\n-----END PRIVATE KEY-----\n",
                              "client_email": "trainer@demo.iam.gserviceaccount.com"}, indent=2)
# The audit's tree: files that hold credentials by name (or, for the service-account key, by content)
CREDENTIALS = {
    ".env": "HF_TOKEN=hf_x\n", ".env.production": "DB=postgres://u:p@h/db\n", "nested/.env.local": "A=1\n",
    "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\n", ".ssh/id_ed25519": "key\n", "certs/server.pem": "pem\n",
    "tls.key": "key\n", ".aws/credentials": "[default]\n", ".aws/config": "[default]\n", ".netrc": "machine x\n",
    ".git-credentials": "https://u:t@github.com\n", ".kube/config": "apiVersion: v1\n",
    "kubeconfig.yaml": "users: []\n",
    ".pypirc": "[pypi]\n", ".npmrc": "//registry/:_authToken=x\n", ".docker/config.json": '{"auths": {}}',
    "my-project-4f2a1c.json": SERVICE_ACCOUNT, ".streamlit/secrets.toml": "key = 1\n",
    "infra/terraform.tfstate": "{}", ".huggingface/token": "hf_x\n", ".cache/huggingface/token": "hf_x\n",
    ".bash_history": "export TOKEN=x\n",
}
INNOCENT = {"train.py": "", ".env.example": "HF_TOKEN=\n", "config.json": '{"type": "bert"}', "id_mapping.py": "",
            "keys.py": "", "tokenizer.json": '{"private_key": "not a service account"}', "docs/ssh.md": ""}


def held_back_line(snap: snapshot.Snapshot) -> str:
    (line,) = [warning for warning in snap.warnings if "held back" in warning]
    return line


def test_credential_like_files_never_travel_by_default_and_one_line_names_them(tmp_path):
    tree(tmp_path, {**CREDENTIALS, **INNOCENT})
    snap = snapshot.take(tmp_path)
    assert names_in(snap) == sorted(INNOCENT)
    line = held_back_line(snap)
    assert "\n" not in line and line.startswith("held back 22 credential-like files")
    assert all(name in line.split(": ", 1)[1] for name in CREDENTIALS) and "--ship-secret PATH" in line


def test_ship_secret_sends_the_named_files_and_no_other(tmp_path):
    tree(tmp_path, {".env": "A=1\n", ".env.production": "", "sa.json": SERVICE_ACCOUNT, "train.py": ""})
    snap = snapshot.take(tmp_path, ship_secrets=[".env", "./sa.json"])
    assert names_in(snap) == [".env", "sa.json", "train.py"]
    assert held_back_line(snap).startswith("held back 1 credential-like file (")
    for wrong in ("train.py", "missing.env", ".env.example"):
        with pytest.raises(UserError, match=f"^--ship-secret '{wrong}': not a file .* holds back .*held back: "
                                            r"\.env, \.env\.production, sa\.json"):
            snapshot.take(tmp_path, ship_secrets=[wrong])


def test_ship_secret_from_the_cli_a_values_file_and_the_python_api(cli):
    from trainctl.sdk.client import Client

    tree(cli.cwd / "src", {".env": "A=1\n", "train.py": ""})
    flag = cli("submit", "jax", "--workdir", "src", "--ship-secret", ".env", "--dry-run", "--", "python", "train.py")
    (cli.cwd / "values.yaml").write_text("workdir: src\nship-secret: [.env]\n")
    values = cli("submit", "jax", "-f", "values.yaml", "--dry-run", "--", "python", "train.py")
    for printed in (flag, values):
        assert printed.returncode == 0 and "code: 2 files" in printed.stderr and "held back" not in printed.stderr
    held = cli("submit", "jax", "--workdir", "src", "--dry-run", "--", "python", "train.py")
    assert "code: 1 file," in held.stderr and "warning: held back 1 credential-like file (never shipped by default): " \
        ".env; ship one on purpose with --ship-secret PATH" in held.stderr
    refused = cli("submit", "jax", "--no-workdir", "--ship-secret", ".env", "--dry-run", "--", "python", "train.py")
    assert refused.returncode == 2 and refused.stderr.startswith("error: --ship-secret .env: no code snapshot")
    resource = Client(backend="local").run([sys.executable, "train.py"], framework="jax",
                                           workdir=str(cli.cwd / "src"), ship_secret=[".env"], dry_run=True)
    assert resource["metadata"]["annotations"]["trainctl.io/code-files"] == "2"
    with speaking(PYTHON), pytest.warns(UserWarning, match=r"held back .* with ship_secret=\['PATH'\]"):
        Client(backend="local").run([sys.executable, "train.py"], framework="jax", workdir=str(cli.cwd / "src"),
                                    dry_run=True)


def test_submit_dry_run_of_the_credential_tree_ships_none_and_names_them_on_one_line(cli):
    import yaml

    tree(cli.cwd, {**CREDENTIALS, "train.py": ""})
    printed = cli("submit", "pytorch", "--workdir", ".", "--dry-run", "-o", "yaml", "--", "python", "train.py")
    assert printed.returncode == 0, printed.stderr
    maps = [doc for doc in yaml.safe_load_all(printed.stdout) if doc["kind"] == "ConfigMap"]
    archive = b"".join(base64.b64decode(doc["binaryData"]["chunk"]) for doc in maps)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:  # and trainctl.report's stand-in package
        assert tar.getnames() == ["train.py", ".trainctl/lib/trainctl/__init__.py",
                                  ".trainctl/lib/trainctl/checkpoints.py", ".trainctl/lib/trainctl/reporting.py"]
    (line,) = [line for line in printed.stderr.splitlines() if "held back" in line]
    assert all(name in line for name in CREDENTIALS), line


# ---- git is the reference ------------------------------------------------------------------------

def git_repository(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=git_env(root))
    return root


def git_env(root: Path) -> dict:
    """git with no personal or system configuration (a core.excludesFile of the machine's would differ)."""
    return {**os.environ, "HOME": str(root), "XDG_CONFIG_HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"}


def git_lists(directory: Path) -> set[str]:
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "-z"], cwd=directory,
                            env=git_env(directory), capture_output=True, check=True).stdout
    return {name.decode() for name in listed.split(b"\0") if name}


def test_a_gitignore_saved_with_a_bom_ignores_its_first_pattern_as_git_does(tmp_path):
    root = git_repository(tmp_path / "repo")
    tree(root, {".gitignore": b"\xef\xbb\xbfsecret.txt\nbuild/\n", "secret.txt": "", "build/x": "", "train.py": ""})
    assert set(names_in(snapshot.take(root))) == git_lists(root) == {".gitignore", "train.py"}


def test_workdir_sub_honours_the_repositorys_outer_gitignore_and_info_exclude_as_git_does(tmp_path):
    root = git_repository(tmp_path / "repo")
    tree(root, {".gitignore": "*.log\nsub/build/\n!keep.log\n", "sub/.gitignore": "!debug.log\n",
                "sub/train.py": "", "sub/run.log": "", "sub/keep.log": "", "sub/debug.log": "", "sub/build/x": "",
                "sub/scratch.txt": "", "sub/deep/notes.tmp": ""})
    (root / ".git" / "info" / "exclude").write_text("scratch.txt\n*.tmp\n")
    expected = {".gitignore", "train.py", "keep.log", "debug.log"}
    assert set(names_in(snapshot.take(root / "sub"))) == git_lists(root / "sub") == expected


def test_a_symlink_ships_only_what_its_targets_own_path_would(tmp_path):
    root = git_repository(tmp_path / "repo")
    tree(root, {".gitignore": "private/\n*.key\n", "private/token": "t", "a.key": "k", ".env": "E=1",
                "train.py": "print(1)\n", "__pycache__/m.cpython-311.pyc": "", "lib/util.py": "u = 1\n"})
    links = {"gitcfg": ".git/config", "token": "private/token", "key": "a.key", "env": ".env",
             "pyc": "__pycache__/m.cpython-311.pyc", "util.py": "lib/util.py", "main.py": "train.py", "lib2": "lib"}
    for name, target in links.items():
        (root / name).symlink_to(target)
    snap = snapshot.take(root)
    assert names_in(snap) == [".gitignore", "lib/util.py", "main.py", "train.py", "util.py"]
    assert {"gitcfg", "token", "key", "env", "pyc", "main.py", "util.py", "lib2"} <= git_lists(root)  # git lists links
    for name in ("gitcfg", "token", "key", "env", "pyc"):
        (warning,) = [w for w in snap.warnings if w.startswith(f"skipped symlink {name}: ")]
        assert f"it points at {links[name]}, which does not travel itself" in warning
    assert "skipped symlink lib2: it points at a directory" in "\n".join(snap.warnings)
    with tarfile.open(fileobj=io.BytesIO(bytes(snap.archive)), mode="r:gz") as tar:
        assert tar.extractfile("main.py").read() == b"print(1)\n"
