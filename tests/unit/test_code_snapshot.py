"""The code snapshot (trainctl.code): ignore rules, determinism, limits, chunking, and the init
container's unpack program run for real, as the pod runs it, against real chunk files."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest
import yaml

from trainctl.code import pods, snapshot
from trainctl.errors import CLI, UserError, speaking
from trainctl.frameworks import by_name
from trainctl.submit.code_plan import request
from trainctl.submit.options import SubmitOptions
from trainctl.submit.render import render


def tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def names_in(snap: snapshot.Snapshot) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(bytes(snap.archive)), mode="r:gz") as tar:
        return tar.getnames()


@pytest.fixture(autouse=True)
def as_the_cli_speaks():
    """The messages of these in-process checks name flags, as the CLI shows them (the Python API's keywords:
    tests/local/test_sdk_keywords.py, and the last lines of test_ship_secret_from_the_cli...)."""
    with speaking(CLI):
        yield


# ---- ignore rules --------------------------------------------------------------------------

def test_gitignore_and_trainctlignore_rules(tmp_path):
    tree(tmp_path, {
        "train.py": "", "helper/model.py": "", "run.log": "", "keep.log": "", "build/out.bin": "",
        "src/build/kept.py": "", "data/x.csv": "", "notes/data": "", "deep/a/b/c.tmp": "", "doc/#x": "",
        ".gitignore": "*.log\n!keep.log\n/build\ndata/\n**/*.tmp\n\\#x\n# a comment\n\n",
        "helper/.gitignore": "model.py\n",
        ".trainctlignore": "!helper/model.py\nsecret.txt\n", "secret.txt": "",
        "sub/.trainctlignore": "/only_here.py\n", "sub/only_here.py": "", "sub/deeper/only_here.py": "",
    })
    kept = names_in(snapshot.take(tmp_path))
    assert kept == sorted(kept)
    assert set(kept) == {".gitignore", ".trainctlignore", "train.py", "keep.log", "src/build/kept.py",
                         "notes/data", "sub/.trainctlignore", "sub/deeper/only_here.py", "helper/.gitignore"}
    # helper/.gitignore (deeper) comes after the root .trainctlignore's re-include: the last match wins


def test_a_pattern_that_matches_nothing_is_no_error(tmp_path):
    tree(tmp_path, {"train.py": "", "b.py": "", ".trainctlignore": "[z-a].py\n[b.py\n\\\n"})
    assert names_in(snapshot.take(tmp_path)) == [".trainctlignore", "b.py", "train.py"]


def test_always_skipped_whatever_the_ignore_files_say(tmp_path):
    tree(tmp_path, {"train.py": "", ".git/HEAD": "", "__pycache__/m.cpython-311.pyc": "", "m.pyc": "",
                    ".venv/bin/python": "", "env/pyvenv.cfg": "", "env/lib/x.py": "", ".trainctl/templates/t": "",
                    "home/jobs/default/j/log": "", ".gitignore": "!.git\n!*.pyc\n"})
    os.environ["TRAINCTL_HOME"], before = str(tmp_path / "home"), os.environ.get("TRAINCTL_HOME")
    try:
        kept = names_in(snapshot.take(tmp_path))
    finally:
        os.environ.pop("TRAINCTL_HOME") if before is None else os.environ.update(TRAINCTL_HOME=before)
    assert kept == [".gitignore", "train.py"]


def test_symlinks_inside_travel_as_content_and_others_are_reported(tmp_path):
    tree(tmp_path / "code", {"real.py": "x = 1\n", "dir/a.py": ""})
    tree(tmp_path, {"outside.py": ""})
    (tmp_path / "code" / "link.py").symlink_to("real.py")
    (tmp_path / "code" / "out.py").symlink_to(tmp_path / "outside.py")
    (tmp_path / "code" / "dirlink").symlink_to("dir")
    snap = snapshot.take(tmp_path / "code")
    assert names_in(snap) == ["dir/a.py", "link.py", "real.py"]
    assert sorted(snap.warnings) == ["skipped symlink dirlink: it points at a directory (directory links are not "
                                     "followed: they may loop or lead out)",
                                     f"skipped symlink out.py: it points outside {tmp_path / 'code'}"]


# ---- determinism -----------------------------------------------------------------------------

def test_same_tree_same_hash_wherever_and_whenever(tmp_path):
    files = {"train.py": "print(1)\n", "pkg/__init__.py": "", "pkg/m.py": "y = 2\n", "run.sh": "#!/bin/sh\n"}
    one, two = tree(tmp_path / "one", files), tree(tmp_path / "two", dict(reversed(files.items())))
    os.chmod(one / "run.sh", 0o755)
    os.chmod(two / "run.sh", 0o700)  # only the executable bit counts
    os.utime(two / "train.py", (1, 1))
    first, second = snapshot.take(one), snapshot.take(two)
    assert first.digest == second.digest and bytes(first.archive) == bytes(second.archive)
    assert (first.files, first.unpacked_bytes) == (4, 25)
    (two / "pkg" / "m.py").write_text("y = 3\n")
    assert snapshot.take(two).digest != first.digest
    with tarfile.open(fileobj=io.BytesIO(bytes(first.archive)), mode="r:gz") as tar:
        members = {m.name: m for m in tar}
    assert members["run.sh"].mode == 0o755 and members["train.py"].mode == 0o644
    assert {(m.mtime, m.uid, m.uname) for m in members.values()} == {(0, 0, "")}


# ---- limits -----------------------------------------------------------------------------------

def test_over_the_limit_is_one_line_naming_the_largest_files(tmp_path):
    tree(tmp_path, {"train.py": "", "weights.bin": os.urandom(300_000), "data.bin": os.urandom(100_000)})
    with pytest.raises(UserError) as refused:
        snapshot.take(tmp_path, limit=200_000)
    message = str(refused.value)
    assert "\n" not in message and "weights.bin (293.0 KiB), data.bin (97.7 KiB)" in message
    assert ".trainctlignore" in message and "--no-workdir" in message and "--workdir-limit" in message



def test_the_archive_lives_in_a_private_file_that_has_no_name(tmp_path, monkeypatch):
    """Past a MiB the archive leaves memory for a temporary file: mode 0600, and unlinked from the start, so
    nothing of it is left behind however the process ends. Its readers get it back piece by piece."""
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    code = tree(tmp_path / "code", {"train.py": "", "weights.bin": os.urandom(3 << 20)})
    snap = snapshot.take(code)
    assert snap.archive.file._rolled  # in a file now (fileno() would make it one: asked only after this)
    status = os.fstat(snap.archive.file.fileno())
    assert status.st_nlink == 0 and stat.S_IMODE(status.st_mode) == 0o600 and os.listdir(spool) == []
    assert len(snap.archive) > 3 << 20
    whole = bytes(snap.archive)
    assert snap.digest == f"sha256:{hashlib.sha256(whole).hexdigest()}"
    pieces = list(pods.chunks(snap.archive))
    assert b"".join(pieces) == whole and max(len(piece) for piece in pieces) == pods.CHUNK_BYTES
    assert len(pieces) == len(pods.config_map_names(snap))
    small = snapshot.take(tree(tmp_path / "small", {"train.py": "print(1)\n"}))
    assert small.archive.file._rolled is False  # a project's code alone stays in memory

def test_a_file_over_10_mib_is_warned_about(tmp_path):
    tree(tmp_path, {"ckpt.pt": b"\0" * (snapshot.LARGE_FILE + 1), "train.py": ""})
    snap = snapshot.take(tmp_path)
    assert [w for w in snap.warnings if w.startswith("ckpt.pt is 10.0 MiB")]


def test_limit_and_mount_values(tmp_path):
    options = SubmitOptions(command=["python", "t.py"], workdir=str(tmp_path))
    for bad, flag in (({"workdir_limit": "lots"}, "--workdir-limit"), ({"workdir_limit": "1"}, "--workdir-limit"),
                      ({"workdir_limit": "1Gi"}, "--workdir-limit"), ({"workdir_mount": "rel"}, "--workdir-mount"),
                      ({"workdir_mount": "/a/../b"}, "--workdir-mount"), ({"workdir_mount": "/"}, "--workdir-mount"),
                      ({"workdir_mount": "/trainctl/x"}, "--workdir-mount"), ({"pip": ["--index-url=x"]}, "--pip"),
                      ({"workdir": str(tmp_path / "nope")}, "--workdir"), ({"no_workdir": True}, "--workdir and --no-workdir"),
                      ({"requirements": str(tmp_path / "nope.txt")}, "--requirements")):
        with pytest.raises(UserError, match=f"^{flag}"):
            request(SubmitOptions(**{**options.__dict__, **bad}), "kubernetes", "PyTorchJob")
    with pytest.raises(UserError, match="^--pip/--requirements: not for mpi"):
        request(SubmitOptions(command=["python", "t.py"], pip=["numpy"]), "local", "MPIJob")


def test_what_travels_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tree(tmp_path, {"train.py": ""}))
    options = SubmitOptions(command=["python", "train.py"])
    assert request(options, "kubernetes", "PyTorchJob").snapshot.source == str(tmp_path)
    assert request(options, "local", "PyTorchJob") is None  # locally the replicas run in the directory itself
    assert request(SubmitOptions(command=["x"], no_workdir=True), "kubernetes", "PyTorchJob") is None
    assert request(SubmitOptions(command=["x"], workdir="."), "local", "PyTorchJob").snapshot is not None


# ---- chunks and the init container ---------------------------------------------------------

@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A 5 MiB archive (random bytes do not compress) and the job that ships it."""
    root = tree(tmp_path_factory.mktemp("big"), {"train.py": "print('ok')\n", "blob.bin": os.urandom(5 << 20)})
    options = SubmitOptions(command=["python", "train.py"], name="big", workdir=str(root))
    code = request(options, "kubernetes", "PyTorchJob")
    return code, render(by_name("pytorch"), options, code)


def test_a_5_mib_archive_is_chunked_under_the_configmap_limit(big):
    code, resource = big
    maps = list(pods.config_maps(code.snapshot, "team"))
    assert len(code.snapshot.archive) > 5 << 20 and len(maps) == 6
    for index, body in enumerate(maps):
        assert body["metadata"]["name"] == f"trainctl-code-{code.snapshot.hex[:20]}-{index}"
        assert body["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "trainctl",
                                              "trainctl.io/code-snapshot": code.snapshot.hex[:20]}
        assert len(base64.b64decode(body["binaryData"]["chunk"])) <= pods.CHUNK_BYTES < 1 << 20
        assert len(json.dumps(body)) < 1_500_000  # what etcd stores per object
    joined = b"".join(base64.b64decode(body["binaryData"]["chunk"]) for body in maps)
    assert joined == bytes(code.snapshot.archive)
    volume = resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"][0]
    assert [s["configMap"]["name"] for s in volume["projected"]["sources"]] == [m["metadata"]["name"] for m in maps]
    assert [s["configMap"]["items"][0]["path"] for s in volume["projected"]["sources"]] == \
        [f"{i:05d}" for i in range(6)]


def init_command(resource: dict, chunks_dir: Path, into: Path) -> list[str]:
    """The rendered init container's command, pointed at a test directory instead of the pod's volumes."""
    init = resource["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["initContainers"][0]
    assert init["image"] == resource["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"]
    swap = {pods.CHUNKS_PATH: str(chunks_dir), pods.DEFAULT_MOUNT: str(into)}
    return [swap.get(word, word) for word in init["command"]]


def write_chunks(code, directory: Path) -> None:
    directory.mkdir()
    for index, body in enumerate(pods.config_maps(code.snapshot, None)):
        (directory / f"{index:05d}").write_bytes(base64.b64decode(body["binaryData"]["chunk"]))


def test_the_init_container_unpacks_the_snapshot(big, tmp_path):
    code, resource = big
    write_chunks(code, tmp_path / "chunks")
    done = subprocess.run(init_command(resource, tmp_path / "chunks", tmp_path / "ws"), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ws" / "train.py").read_text() == "print('ok')\n"
    assert (tmp_path / "ws" / "blob.bin").stat().st_size == 5 << 20
    # 2 files and the stand-in package's 3 (trainctl.report's and the checkpoint functions')
    assert f"5 files of {code.snapshot.digest[:19]}" in done.stdout
    for module in ("reporting.py", "checkpoints.py"):
        assert (tmp_path / "ws" / ".trainctl" / "lib" / "trainctl" / module).is_file()


@pytest.mark.parametrize("damage", ["flip", "missing"])
def test_the_init_container_refuses_a_changed_or_incomplete_snapshot(big, tmp_path, damage):
    code, resource = big
    write_chunks(code, tmp_path / "chunks")
    third = tmp_path / "chunks" / "00002"
    if damage == "flip":
        data = bytearray(third.read_bytes())
        data[100] ^= 1
        third.write_bytes(bytes(data))
    else:
        third.unlink()
    done = subprocess.run(init_command(resource, tmp_path / "chunks", tmp_path / "ws"), capture_output=True, text=True)
    assert done.returncode == 1
    assert f"not {code.snapshot.hex}" in done.stderr
    assert f"kubectl delete configmap -l trainctl.io/code-snapshot={code.snapshot.hex[:20]}) and submit again" \
        in done.stderr
    assert not (tmp_path / "ws").exists()  # nothing unpacked from a snapshot that failed its check


def test_the_unpacker_keeps_every_member_inside_its_directory(tmp_path):
    from trainctl.code import unpack

    for name in ("../escape.py", "/abs.py", "a/../../escape.py"):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            info = tarfile.TarInfo(name)
            tar.addfile(info, io.BytesIO(b""))
        with pytest.raises(unpack.Refused, match="outside"):
            unpack.extract(buffer.getvalue(), str(tmp_path / "ws"))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        link = tarfile.TarInfo("link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(unpack.Refused, match="not a regular file"):
        unpack.extract(buffer.getvalue(), str(tmp_path / "ws"))
    assert not (tmp_path / "escape.py").exists()


def test_an_image_without_python3_says_so(big, tmp_path):
    code, resource = big
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "sh").symlink_to("/bin/sh")
    command = init_command(resource, tmp_path / "chunks", tmp_path / "ws")
    done = subprocess.run([str(bare / "sh"), *command[1:]], capture_output=True, text=True, env={"PATH": str(bare)})
    assert done.returncode == 127
    assert done.stderr.strip() == ("trainctl: trainctl-unpack needs python3 in the image (it ships code and packages "
                                   "without building one): use an image with python3, or submit with --no-workdir "
                                   "and no --pip")


def test_the_init_container_runs_the_image_as_the_replica_does(tmp_path):
    tree(tmp_path, {"train.py": ""})
    worker = "spec.jaxReplicaSpecs.Worker.template.spec.containers[0]"
    options = SubmitOptions(command=["python", "train.py"], workdir=str(tmp_path), set=[
        f"{worker}.image=me/img:2", f"{worker}.imagePullPolicy=Never", f"{worker}.securityContext.runAsUser=1000"])
    resource = render(by_name("jax"), options, request(options, "kubernetes", "JAXJob"))
    (init,) = resource["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["initContainers"]
    assert (init["image"], init["imagePullPolicy"], init["securityContext"]) == ("me/img:2", "Never", {"runAsUser": 1000})
    main = resource["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert init["securityContext"] is not main["securityContext"]  # one object twice: YAML would alias it


@pytest.mark.parametrize("output", [[], ["-o", "yaml"]], ids=["abridged", "whole"])
def test_the_printed_yaml_has_no_anchors(cli, output):
    tree(cli.cwd, {"train.py": ""})
    printed = cli("submit", "tf", "--workers", "2", "--ps", "1", "--workdir", ".", "--pip", "x", "--dry-run",
                  *output, "--", "python", "train.py")
    assert printed.returncode == 0 and "&id" not in printed.stdout and "*id" not in printed.stdout


def test_the_default_dry_run_shows_what_runs_travels_and_installs_first_and_the_whole_yaml_on_request(cli):
    """A job with code and packages was ~580 lines, two embedded programs in every replica (issue 23)."""
    tree(cli.cwd, {"train.py": "", "reqs.txt": "einops\n"})
    args = ["submit", "pytorch", "--name", "dry", "--workers", "2", "--workdir", ".", "--pip", "numpy",
            "--requirements", "reqs.txt", "--dry-run"]
    shown = cli(*args, "--", "python", "train.py", "--epochs", "3")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[:4] == [
        "# dry run, nothing created: pytorchjob/dry (Master 1 + Worker 1)",
        "#   runs      python train.py --epochs 3, in docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        f"#   travels   2 files, 7 B ({lines[2].split('(')[1].split(')')[0]}) from {cli.cwd}, in 1 ConfigMap, "
        "unpacked into /workspace before the command",
        "#   installs  numpy -r reqs.txt, with pip in each replica before the command"]
    assert "add -o yaml for the whole" in lines[4] and len(lines) < 200, len(lines)
    (job,) = yaml.safe_load_all(shown.stdout)  # still YAML: the job alone, its programs one line each
    assert job["kind"] == "PyTorchJob" and "binaryData" not in shown.stdout
    programs = [container["command"][4] for container in pods.script_containers(job)]
    assert len(programs) == 4 and all(pods.ABRIDGED in program for program in programs), programs

    whole = cli(*args, "-o", "yaml", "--", "python", "train.py", "--epochs", "3")
    config_map, full = yaml.safe_load_all(whole.stdout)
    assert config_map["kind"] == "ConfigMap" and len(whole.stdout.splitlines()) > 400
    assert full == {**full, "metadata": job["metadata"]} and full != job  # the same job, programs whole
    (cli.cwd / "abridged.yaml").write_text(shown.stdout)
    refused = cli("apply", "-f", "abridged.yaml")
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        "error: abridged.yaml: submit --dry-run's abridged view, without trainctl-pip and trainctl-unpack: print the "
        "job to apply with submit ... --dry-run -o yaml"]
    assert not (cli.home / "jobs").exists()


def test_a_job_without_code_or_packages_dry_runs_as_its_whole_yaml(cli):
    plain = cli("submit", "pytorch", "--name", "plain", "--dry-run", "--", "python", "train.py")
    assert plain.stdout == cli("submit", "pytorch", "--name", "plain", "--dry-run", "-o", "yaml", "--", "python",
                               "train.py").stdout


def test_describe_for_status(big):
    code, resource = big
    line = pods.describe(resource["metadata"]["annotations"])
    assert line == (f"code: {code.snapshot.digest[:19]} ({snapshot.human(len(code.snapshot.archive))} compressed, "
                    f"2 files) from {code.snapshot.source}")
    assert pods.describe({}) is None


def test_values_file_keys_and_flags_reach_the_same_options(cli):
    tree(cli.cwd / "src", {"train.py": "", "reqs.txt": "einops\n"})
    (cli.cwd / "values.yaml").write_text("workdir: src\nworkdir-mount: /code\npip: [numpy, einops]\n"
                                         "requirements: src/reqs.txt\nworkdir-limit: 1Mi\n")
    from_file = cli("submit", "jax", "--name", "v", "-f", "values.yaml", "--dry-run", "-o", "json", "--", "python",
                    "train.py")
    from_flags = cli("submit", "jax", "--name", "v", "--workdir", "src", "--workdir-mount", "/code", "--pip", "numpy",
                     "--pip", "einops", "--requirements", "src/reqs.txt", "--dry-run", "-o", "json", "--", "python",
                     "train.py")
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout) == json.loads(from_flags.stdout)
    config_map, job = json.loads(from_file.stdout)["items"]
    main = job["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert main["workingDir"] == "/code" and main["command"][5:] == [
        "--pip=numpy", "--pip=einops", "--requirements-text=einops\n", "--", "python", "train.py"]
    assert "code: 2 files" in from_file.stderr
    (cli.cwd / "values.yaml").write_text("no-workdir: yes please\n")
    refused = cli("submit", "jax", "-f", "values.yaml", "--dry-run", "--", "python", "train.py")
    assert refused.returncode == 2 and "no-workdir: must be true or false" in refused.stderr


def test_apply_takes_back_what_submit_dry_run_printed(cli):
    tree(cli.cwd / "src", {"train.py": "print('from the snapshot')\n"})
    printed = cli("submit", "jax", "--name", "printed", "--workdir", "src", "--dry-run", "-o", "yaml", "--", "python",
                  "train.py")
    assert printed.returncode == 0, printed.stderr
    (cli.cwd / "job.yaml").write_text(printed.stdout)
    assert cli("apply", "-f", "job.yaml", "--dry-run").stdout == printed.stdout
    applied = cli("apply", "-f", "job.yaml")
    assert applied.returncode == 0, applied.stderr
    assert cli("wait", "printed").returncode == 0
    assert "from the snapshot" in cli("logs", "printed").stdout
    assert (cli.home / "jobs" / "default" / "printed" / "workspace" / "train.py").is_file()
    chunk = printed.stdout.split("chunk: ", 1)[1].split("\n", 1)[0]
    for damaged in (printed.stdout.replace(chunk, "A" + chunk[1:]), printed.stdout.replace(chunk, "not=base64")):
        (cli.cwd / "job.yaml").write_text(damaged.replace("name: printed", "name: damaged"))
        refused = cli("apply", "-f", "job.yaml")
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "code snapshot" in refused.stderr and "submit --dry-run" in refused.stderr
    assert not (cli.home / "jobs" / "default" / "damaged").exists()


def test_apply_reads_the_json_list_submit_prints(cli):
    tree(cli.cwd / "src", {"train.py": ""})
    printed = cli("submit", "jax", "--name", "listed", "--workdir", "src", "--dry-run", "-o", "json", "--", "python",
                  "train.py")
    (cli.cwd / "job.json").write_text(printed.stdout)
    again = cli("apply", "-f", "job.json", "--dry-run", "-o", "json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(printed.stdout)
    (cli.cwd / "job.json").write_text('{"apiVersion": "v1", "kind": "List", "items": "nope"}')
    refused = cli("apply", "-f", "job.json")
    assert refused.returncode == 2 and "items must be a list" in refused.stderr


def test_the_pip_wrapper_in_an_image_without_pip_says_so(tmp_path):
    """The main container's command as rendered, run by a python3 without pip (a venv made --without-pip)."""
    import sys
    import venv

    venv.create(tmp_path / "nopip", with_pip=False)
    options = SubmitOptions(command=["python3", "-c", "print('ran')"], pip=["einops"])
    resource = render(by_name("pytorch"), options, request(options, "local", "PyTorchJob"))
    command = resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    env = {"PATH": f"{tmp_path / 'nopip' / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin",
           "TRAINCTL_PIP_CACHE": str(tmp_path / "cache"), "PIP_NO_INDEX": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1 and "ran" not in done.stdout, (done.stdout, done.stderr, sys.executable)
    assert done.stderr.strip().splitlines()[-1] == (
        "trainctl-pip: pip install failed with exit code 1 (is pip in the image? python3 -m pip must work): "
        "the job's command did not run")


def test_the_dry_run_streams_the_same_text_a_whole_dump_would():
    import yaml

    from trainctl.cli.common import dumped_pieces

    documents = [{"kind": "ConfigMap", "binaryData": {"chunk": "QUJD" * 10}}, {"kind": "ConfigMap", "n": [1, {}]},
                 {"kind": "PyTorchJob", "spec": {"x": "é\n", "y": None}}]
    assert "".join(dumped_pieces(iter(documents), "json")) == json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": documents}, indent=2)
    assert list(yaml.safe_load_all("".join(dumped_pieces(iter(documents), "yaml")))) == documents
    assert "".join(dumped_pieces(iter(documents[:1]), "json")) == json.dumps(documents[0], indent=2)
