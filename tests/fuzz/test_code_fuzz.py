"""Fuzzing code shipping: hostile ignore files and trees, and hostile values of the code flags.

A snapshot of any tree under any ignore file is taken the same twice and unpacks to exactly
the files it lists; every value of --workdir-mount, --pip, --requirements and --workdir-limit
ends in exit 0 or one line, and an accepted one lands in the pod spec as one whole string.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.fuzz.harness import SPECIAL, all_strings, fuzz, json_documents, run, text_values
from trainctl.code import credentials, snapshot, unpack
from trainctl.core.validation import validate
from trainctl.errors import UserError

pytestmark = pytest.mark.fuzz

segment = st.lists(st.sampled_from(list("abc.*![]?/#\\ -_") + ["**", "x y", "[c-a]", "[!"]), min_size=1,
                   max_size=8).map("".join)
ignore_lines = st.lists(st.one_of(segment, st.sampled_from(SPECIAL), text_values), max_size=8).map("\n".join)
names = st.lists(st.text(st.sampled_from(list("abc.-_ #!*")), min_size=1, max_size=6), min_size=1, max_size=3) \
    .map("/".join).filter(lambda n: all(part not in (".", "..") for part in n.split("/")))


def hostile_bytes(text: str) -> bytes:
    """``text`` as a file's bytes: a lone surrogate U+DC80..U+DCFF as the byte it escapes, any other as the
    invalid UTF-8 that encodes it (surrogateescape alone cannot write U+DD00)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


@fuzz(150)
@given(gitignore=ignore_lines, trainctlignore=ignore_lines, files=st.lists(names, max_size=8, unique=True))
def test_any_tree_under_any_ignore_file_snapshots_the_same_and_unpacks_to_its_list(
        tmp_path_factory, gitignore, trainctlignore, files):
    root = tmp_path_factory.mktemp("tree")
    (root / ".gitignore").write_bytes(hostile_bytes(gitignore))
    (root / ".trainctlignore").write_bytes(hostile_bytes(trainctlignore))
    written = set()
    for index, name in enumerate(files):
        path = root / name
        if any(parent.is_file() for parent in path.parents) or path.is_dir():
            continue  # a/b beside a file a: not a tree
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(index))
        written.add(name)
    first, second = snapshot.take(root), snapshot.take(root)
    assert first.digest == second.digest
    with tarfile.open(fileobj=io.BytesIO(bytes(first.archive)), mode="r:gz") as tar:
        listed = tar.getnames()
    assert listed == sorted(listed) and set(listed) <= written | {".gitignore", ".trainctlignore"}
    into = tmp_path_factory.mktemp("into")
    assert unpack.extract(bytes(first.archive), str(into)) == len(listed)
    assert sorted(str(p.relative_to(into)) for p in into.rglob("*") if p.is_file()) == sorted(listed)


@fuzz(200)
@given(mount=st.one_of(text_values, st.just("/code")), pip=st.lists(text_values, max_size=3),
       limit=st.one_of(st.none(), text_values, st.sampled_from(["1Ki", "64Mi", "256Mi", "257Mi", "0"])),
       requirements=st.one_of(st.none(), text_values))
def test_code_flag_values_end_in_one_line_or_land_whole(mount, pip, limit, requirements):
    project = Path("project")
    project.mkdir(exist_ok=True)
    (project / "train.py").write_text("print(1)\n")
    (project / "reqs.txt").write_text("einops\n")
    arguments = ["--workdir", str(project), "--workdir-mount", mount]
    arguments += [word for spec in pip for word in ("--pip", spec)]
    arguments += ["--workdir-limit", limit] if limit is not None else []
    arguments += ["--requirements", requirements] if requirements is not None else []
    result = run("submit", "pytorch", "--name", "code", "--dry-run", "-o", "json", *arguments, "--", "python", "t.py")
    if result.code:
        return
    config_map, job = json_documents(result)
    assert config_map["kind"] == "ConfigMap"
    validate(job)
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert master["containers"][0]["workingDir"] == mount
    assert master["initContainers"][0]["command"][-1] == mount
    strings = set(all_strings(job))
    assert all(f"--pip={spec}" in strings for spec in pip)


def test_the_snapshot_is_refused_in_one_line_for_a_missing_directory():
    with pytest.raises(UserError, match="^workdir 'nowhere': no such directory$"):  # the keyword; the CLI's flag
        snapshot.take("nowhere")


def archive_of(members: list[tuple[str, bytes, bytes]]) -> bytes:
    """A tar.gz of (name, tar type, data): what a hostile file may hold under a hash that matches it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.type, info.size = kind, len(data) if kind == tarfile.REGTYPE else 0
            info.linkname = "/etc/passwd" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return buffer.getvalue()


archives = st.one_of(
    st.binary(max_size=64),
    st.lists(st.tuples(st.one_of(names, st.sampled_from(["../x", "/abs", "a/../../x", "./ok", "..."])),
                       st.sampled_from([tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE,
                                        tarfile.CHRTYPE, tarfile.FIFOTYPE]),
                       st.binary(max_size=16)), max_size=4).map(archive_of),
)


@fuzz(150)
@given(archive=archives, chunk_name=st.one_of(st.just("trainctl-code-abc-0"), text_values),
       digest=st.one_of(st.none(), text_values), data=st.one_of(st.none(), text_values))
def test_apply_of_hostile_snapshot_configmaps_ends_in_one_line_and_unpacks_nothing_outside(
        archive, chunk_name, digest, data):
    import base64
    import hashlib
    import json

    real = f"sha256:{hashlib.sha256(archive).hexdigest()}"
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": chunk_name, "labels": {"trainctl.io/code-snapshot": "abc"},
                               "annotations": {"trainctl.io/code-digest": digest or real}},
                  "binaryData": {"chunk": data if data is not None else base64.b64encode(archive).decode()}}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob",
           "metadata": {"name": "hostile", "annotations": {"trainctl.io/code-digest": digest or real}},
           "spec": {"jaxReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [
               {"name": "jax", "image": "python:3.11", "command": ["python", "-c", "pass"]}]}}}}}}
    Path("jobs.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [config_map, job]}))
    result = run("apply", "-f", "jobs.json", "--no-preflight")
    if result.code == 0:
        from trainctl.sdk.client import Client

        Client(backend="local").delete("hostile")
    assert not Path("x").exists() and not Path("../x").exists()


TREE = ["a", "b", "a.b", "ab", "c", "a/b", "a/a", "b/a", "a/b/c", "ab/c", "c/a/b", ".a", "a b", "x[a]", "d/e/f/a"]
git_lines = st.lists(st.lists(st.sampled_from(list("ab.*!?/c") + ["**", "\\*", "[ab]", "[!a]", "[a-c]"]),
                              min_size=1, max_size=5).map("".join), min_size=1, max_size=3).map("\n".join)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is the oracle")
@fuzz(120)
@given(gitignore=git_lines, files=st.lists(st.sampled_from(TREE), min_size=1, max_size=7, unique=True))
def test_gitignore_rules_select_what_git_selects(tmp_path_factory, gitignore, files):
    """git itself (ls-files --others --exclude-standard) is the reference for .gitignore semantics."""
    root = tmp_path_factory.mktemp("git")
    for name in files:
        path = root / name
        if not any(parent.is_file() for parent in path.parents) and not path.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x")
    (root / ".gitignore").write_text(gitignore + "\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "-z"], cwd=root,
                            capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(bytes(snapshot.take(root).archive)), mode="r:gz") as tar:
        assert set(tar.getnames()) == {name.decode() for name in listed.split(b"\0") if name}, gitignore


# ---- generated workdir trees: credentials, links, special files, outer ignore rules -----------------

SERVICE_ACCOUNT = b'{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----"}'
ENTRY_NAMES = ["a", "b", "a.b", "c/a", "c/b.c", ".env", ".env.example", "id_rsa", "c/.ssh/id_ed25519", "b.pem",
               "a.key", "c/a.json", "b.json", ".aws/credentials", ".netrc", "c/.bash_history", "kubeconfig.yaml"]
LINK_TARGETS = [*ENTRY_NAMES, "c", ".git/config", "../outside", "nowhere", "loop"]
# What the deny-list exists for, written out independently of trainctl.code.credentials
NEVER = {".env", "id_rsa", "c/.ssh/id_ed25519", "b.pem", "a.key", ".aws/credentials", ".netrc", "c/.bash_history",
         "kubeconfig.yaml"}
entries = st.lists(st.tuples(st.sampled_from(ENTRY_NAMES), st.sampled_from(["file", "file", "link", "fifo", "key"]),
                             st.sampled_from(LINK_TARGETS)), max_size=10, unique_by=lambda entry: entry[0])


def write_entry(root: Path, name: str, kind: str, target: str) -> None:
    path = root / name
    if any(os.path.lexists(root / parent) and not (root / parent).is_dir() or (root / parent).is_symlink()
           for parent in Path(name).parents) or os.path.lexists(path):
        return  # a/b beside a file or link a: not a tree
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "link":
        path.symlink_to(path.name if target == "loop" else Path(*[".."] * name.count("/"), target))
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(SERVICE_ACCOUNT if kind == "key" else name.encode())


def git(directory: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(directory), "XDG_CONFIG_HOME": str(directory),
           "GIT_CONFIG_NOSYSTEM": "1"}  # no core.excludesFile of this machine's
    return subprocess.run(["git", *args], cwd=directory, env=env, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is the oracle")
@fuzz(150)
@given(tree=entries, gitignore=st.one_of(st.just(""), git_lines), bom=st.booleans(), sub=st.booleans(),
       outer=st.one_of(st.just(""), git_lines), exclude=st.one_of(st.just(""), git_lines))
def test_generated_workdirs_ship_what_git_lists_less_credentials_and_links_whose_targets_stay(
        tmp_path_factory, tree, gitignore, bom, sub, outer, exclude):
    """The snapshot holds exactly git's untracked, unignored files (BOM, outer .gitignore and info/exclude
    included) less credential-like ones, with a symlink only where its target's own path travels; never a
    deny-listed name, and every FIFO or loop is a warning, never a hang or a traceback."""
    repository = tmp_path_factory.mktemp("repo")
    assert git(repository, "init", "-q").returncode == 0
    root = repository / "s" if sub else repository
    root.mkdir(exist_ok=True)
    (repository / ".git" / "info" / "exclude").write_text(exclude + "\n")
    if sub:
        (repository / ".gitignore").write_text(outer + "\n")
        assume(git(repository, "check-ignore", "-q", "s/").returncode == 1)  # an ignored workdir ships as asked
    (root / ".gitignore").write_bytes(b"\xef\xbb\xbf" * bom + gitignore.encode() + b"\n")
    for name, kind, target in tree:
        write_entry(root, name, kind, target)
    listed = git(root, "ls-files", "--others", "--exclude-standard", "-z").stdout
    listed = {name.decode() for name in listed.split(b"\0") if name}
    regular = {name for name in listed if (root / name).is_file() and not (root / name).is_symlink()
               and not credentials.credential_like(name, root / name)}
    linked = {name for name in listed if (root / name).is_symlink()
              and not credentials.credential_like(name, root / name)
              and os.path.realpath(root / name).startswith(f"{root}/")
              and os.path.relpath(os.path.realpath(root / name), root) in regular}
    taken = snapshot.take(root)
    with tarfile.open(fileobj=io.BytesIO(bytes(taken.archive)), mode="r:gz") as tar:
        shipped = set(tar.getnames())
    assert shipped == regular | linked, (sorted(shipped), sorted(regular | linked))
    assert not shipped & NEVER  # and no service-account key (recognised in .json files, by content):
    assert not any(b"service_account" in (root / name).read_bytes() for name in shipped if name.endswith(".json"))
    for name, kind, target in tree:
        fifo = kind == "fifo" and stat.S_ISFIFO(os.lstat(root / name).st_mode) if (root / name).exists() else False
        loop = kind == "link" and target == "loop" and (root / name).is_symlink() \
            and not credentials.credential_like(name, root / name)
        if (fifo or loop) and git(root, "check-ignore", "-q", "--no-index", name).returncode == 1:
            assert any(warning.startswith((f"skipped {name}: ", f"skipped symlink {name}: "))
                       for warning in taken.warnings), taken.warnings
