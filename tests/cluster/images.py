"""Container images for the real-node test tier (issue 14), built without a registry or a Docker daemon.

scripts/test.sh builds them all and the real-node tier (tests/cluster/realnode.py) imports them
into its node's containerd. Run by hand, as root:

    python -m tests.cluster.images pause        # prints the path of each OCI archive it built
    python -m tests.cluster.images python
    python -m tests.cluster.images python-frameworks
    python -m tests.cluster.images controller
    python -m tests.cluster.images --from debian      # those that need no Kubernetes build (or kube-build)
    ctr -n k8s.io images import <archive>       # what the real node will do; pods then use
                                                 # imagePullPolicy: Never with the printed name

An OCI image is just files: a layer (a tar of the root filesystem), a config (entrypoint, env,
user, and the layer's digest) and a manifest naming both, wrapped as an "OCI layout" tar
(``oci-layout``, ``index.json``, ``blobs/sha256/<digest>``) that ``ctr images import`` reads.
Each image here has a single uncompressed layer: compression would cost more CPU than the copy
into containerd saves, since nothing is ever pushed.

* ``pause``: the pod sandbox's init process, ``gcc -Os -static`` of build/pause/linux/pause.c from
  the same Debian kubernetes source tree the node binaries are built from (scripts/kube-source.sh).
* ``busybox``: Debian's static busybox (the PyTorch workers' wait-for-master init container).
* ``kubectl-delivery``: the MPI launcher's init container: static busybox, the static kubectl built
  with the node binaries, and DELIVER_KUBECTL as the entrypoint.
* ``python``: a Debian bookworm root filesystem from ``mmdebstrap`` with python3 and Debian's Open MPI
  and mpi4py, plus the pinned CPU frameworks (torch, numpy, tensorflow-cpu and tf-keras from
  requirements/) installed by pip inside it, and the repository's examples/ at /opt/trainctl/examples.
* ``python-frameworks``: the same base with the pinned CPU xgboost-cpu, paddlepaddle and jax/jaxlib
  instead (XGBoostJob, PaddleJob and JAXJob pods), imported into a node only when a test needs it.
* ``controller``: trainctl's controller image, from controller/Dockerfile's own steps, with Debian
  bookworm's Python 3.11 standing in for ``python:3.11-slim`` (see ``build_controller``).

pip inside the root filesystem uses this machine's pip configuration (``pip config list``): its
local wheel directory is what provides a CPU torch. Local paths it names are bind-mounted
read-only into the root filesystem inside a private mount namespace (``unshare --mount``), so
those mounts vanish with the process whatever happens.

Archives are cached by content under ~/.cache/trainctl/images/: the file name carries a digest of
every input (recipe version, Debian packages, pins, source files), so a changed input builds a
new image and an unchanged one is reused; building one removes the older archive of its kind. The
Debian root filesystem the python and controller images start from is cached there too, as a tar.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.server import SOURCE_VERSION

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trainctl" / "images"
# Bump when the way an image is assembled changes, so cached archives are rebuilt.
RECIPE_VERSION = 1
DEBIAN_SUITE = "bookworm"
# The real-node tier trains PyTorch and TensorFlow jobs in pods (pins from requirements/): tf-keras
# goes in with --no-deps, as in scripts/test.sh (it requires `tensorflow`, not the -cpu build).
PYTHON_IMAGE_PACKAGES = ("torch", "numpy", "tensorflow-cpu")
PYTHON_IMAGE_NO_DEPS = ("tf-keras",)
# ... and fine-tunes with the Hugging Face recipe (requirements/finetune.txt; the recipe itself travels)
PYTHON_IMAGE_FINETUNE = ("transformers", "peft", "datasets", "accelerate")
# MPI comes from Debian, not from the pip pins the local backend uses: Open MPI 4's mpirun (ORTE) starts
# its orted on each worker through OMPI_MCA_plm_rsh_agent (the controller's kubexec.sh) with orted on
# the image's PATH, which is how the operator's own images do it; python3-mpi4py is built against it.
PYTHON_IMAGE_DEBIAN_MPI = ("openmpi-bin", "python3-mpi4py")
# XGBoostJob, PaddleJob and JAXJob train in a second image (issue 33): CPU wheels only, kept out of the
# python image so the tests of the other kinds import nothing more. numpy is pinned for all of them.
FRAMEWORKS_IMAGE_PACKAGES = ("numpy", "xgboost-cpu", "paddlepaddle", "jax", "jaxlib")
# paddle's libpaddle.so links OpenMP's runtime, which its wheel does not carry
FRAMEWORKS_IMAGE_DEBIAN = ("libgomp1",)
EXAMPLES_IN_IMAGE = Path("/opt/trainctl/examples")
# Not in the image: the fine-tuning tests prove the recipe and its data travel with the job's code.
EXAMPLES_NOT_IN_IMAGE = ("finetune",)
# Docker's default PATH: images built by docker carry it in their config, and the CRI passes it on.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class SetupStepError(Exception):
    """A set-up step failed; the message names the step and how to fix it."""


@dataclass(frozen=True)
class ImageConfig:
    """The runtime part of an OCI image config (what a Dockerfile's ENV/USER/ENTRYPOINT/CMD set)."""

    entrypoint: list[str]
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    user: str = ""

    def to_oci(self) -> dict:
        env = {"PATH": DEFAULT_PATH, **self.env}
        config = {"Entrypoint": self.entrypoint, "Cmd": self.cmd,
                  "Env": [f"{key}={value}" for key, value in env.items()]}
        if self.user:
            config["User"] = self.user
        return config


# --- OCI layout -------------------------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(data))


def write_oci_archive(layer: Path, config: ImageConfig, name: str, out: Path) -> None:
    """Wrap one uncompressed layer tar as an OCI layout tar named ``name`` (written atomically)."""
    layer_digest = _sha256_file(layer)
    config_blob = json.dumps({
        "architecture": "amd64", "os": "linux", "config": config.to_oci(),
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
    }, sort_keys=True).encode()
    manifest_blob = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": f"sha256:{hashlib.sha256(config_blob).hexdigest()}", "size": len(config_blob)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": f"sha256:{layer_digest}", "size": layer.stat().st_size}],
    }, sort_keys=True).encode()
    index = {"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": f"sha256:{hashlib.sha256(manifest_blob).hexdigest()}", "size": len(manifest_blob),
        # ctr import names the image after io.containerd.image.name; other tools read ref.name
        "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name},
    }]}
    partial = out.with_suffix(".partial")
    with tarfile.open(partial, "w") as archive:
        _add_bytes(archive, "oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        _add_bytes(archive, "index.json", json.dumps(index).encode())
        for blob in (config_blob, manifest_blob):
            _add_bytes(archive, f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}", blob)
        archive.add(layer, f"blobs/sha256/{layer_digest}")
    partial.rename(out)


# --- helpers ----------------------------------------------------------------------------------


def run_step(step: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run ``argv``; on failure raise SetupStepError naming ``step`` with the last lines of its output."""
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
        raise SetupStepError(f"{step} failed (exit {result.returncode}): {' | '.join(tail)}")
    return result


KEY_LENGTH = 16


def _content_key(*inputs: object) -> str:
    return hashlib.sha256(json.dumps([RECIPE_VERSION, *inputs], sort_keys=True).encode()).hexdigest()[:KEY_LENGTH]


def _cached_build(kind: str, key: str, build_layer, config: ImageConfig) -> Path:
    """Return the archive for (kind, key); if missing, ``build_layer(layer, workdir)`` writes its layer tar."""
    out = CACHE / f"{kind}-{key}.oci.tar"
    if out.exists():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"trainctl-image-{kind}-") as work:
        layer = Path(work) / "layer.tar"
        build_layer(layer, Path(work))
        write_oci_archive(layer, config, image_name(kind, key), out)
    # one archive per kind: the controller's changes with every edit of trainctl/, and each is 250+ MB
    for stale in archives_of(kind):
        if stale != out:
            stale.unlink()
    return out


def archives_of(kind: str) -> list[Path]:
    """The cached archives of ``kind``: the key's length is part of the pattern, so "python" does not
    take "python-frameworks"'s archive for one of its own."""
    return sorted(CACHE.glob(f"{kind}-{'?' * KEY_LENGTH}.oci.tar"))


def image_name(kind: str, key: str) -> str:
    """The name pods use (with imagePullPolicy: Never); the tag is the content key."""
    return f"trainctl.local/{kind}:{key}"


def _tar_directory(rootfs: Path, layer: Path) -> None:
    # GNU tar keeps device nodes, hard links and numeric owners exactly as mmdebstrap made them.
    run_step("tar of the root filesystem", ["tar", "--numeric-owner", "--xattrs", "--sort=name",
                                            "-C", str(rootfs), "-cf", str(layer), "."])


# --- pause ------------------------------------------------------------------------------------


def kube_source_tree() -> Path:
    """The patched Debian kubernetes source tree shared with the binaries' builds (made on first use)."""
    script = f"source {shlex.quote(str(REPO / 'scripts' / 'kube-source.sh'))} && kube_source_tree"
    return Path(run_step("preparing the kubernetes source tree", ["bash", "-c", script]).stdout.strip())


def build_pause() -> Path:
    source = kube_source_tree() / "build" / "pause" / "linux" / "pause.c"
    key = _content_key("pause", source.read_text())

    def build_layer(layer: Path, work: Path) -> None:
        binary = work / "pause"
        run_step("gcc -static of pause.c (needs gcc and libc6-dev)",
             ["gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=trainctl", "-o", str(binary), str(source)])
        run_step("strip of pause", ["strip", str(binary)])
        with tarfile.open(layer, "w") as archive:
            archive.add(binary, "pause")

    return _cached_build("pause", key, build_layer, ImageConfig(entrypoint=["/pause"]))


# --- busybox ----------------------------------------------------------------------------------


BUSYBOX = Path("/bin/busybox")


def _busybox_applets() -> list[str]:
    if not BUSYBOX.exists():
        raise SetupStepError("no /bin/busybox: install busybox-static (bash scripts/build-node.sh)")
    return run_step("busybox --list", [str(BUSYBOX), "--list"]).stdout.split()


def _add_busybox(archive: tarfile.TarFile, applets: list[str]) -> None:
    """/bin/busybox with a link per applet, and /tmp."""
    for directory in ("bin", "tmp"):
        info = tarfile.TarInfo(directory)
        info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
        archive.addfile(info)
    archive.add(BUSYBOX, "bin/busybox")
    for applet in applets:
        if applet != "busybox":
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            archive.addfile(link)


def build_busybox() -> Path:
    """Debian's static busybox with a link per applet: what the operator's small helper containers
    need (the PyTorch workers' wait-for-master init container runs sh, seq, sleep and nslookup)."""
    applets = _busybox_applets()
    key = _content_key("busybox", _sha256_file(BUSYBOX), applets)

    def build_layer(layer: Path, work: Path) -> None:
        with tarfile.open(layer, "w") as archive:
            _add_busybox(archive, applets)

    return _cached_build("busybox", key, build_layer, ImageConfig(entrypoint=["/bin/sh"]))


# --- kubectl-delivery -------------------------------------------------------------------------

# kubectl built with the node binaries (scripts/build-node.sh: CGO_ENABLED=0, so static)
NODE_KUBECTL = CACHE.parent / "node" / SOURCE_VERSION / "kubectl"
# What upstream's kubeflow/kubectl-delivery image does, in our own words: hand kubectl to the MPI
# launcher's main container, then hold the launcher until every worker in its hostfile accepts a
# kubectl exec (mpirun's first exec would fail otherwise). It runs as the launcher's ServiceAccount,
# whose Role allows exec on the workers only, so the launcher itself (a GPU launcher is in the
# hostfile) is skipped.
DELIVER_KUBECTL = """#!/bin/sh
set -eu
: "${TARGET_DIR:?set TARGET_DIR, e.g. /opt/kube}" "${NAMESPACE:?set NAMESPACE}"
cp /bin/kubectl "$TARGET_DIR/kubectl"
while read -r host _; do
  [ -n "$host" ] && [ "$host" != "$(hostname)" ] || continue
  until kubectl -n "$NAMESPACE" exec "$host" -- true >/dev/null 2>&1; do
    echo "waiting for worker $host"
    sleep 1
  done
  echo "worker $host accepts kubectl exec"
done < /etc/mpi/hostfile
"""


def build_kubectl_delivery() -> Path:
    """The MPI launcher's init container (upstream: kubeflow/kubectl-delivery): static busybox for
    the script's sh, cp, hostname and sleep; the static kubectl; the script as the entrypoint."""
    if not NODE_KUBECTL.exists():
        raise SetupStepError(f"no {NODE_KUBECTL}: run bash scripts/build-node.sh")
    applets = _busybox_applets()
    key = _content_key("kubectl-delivery", _sha256_file(BUSYBOX), applets, _sha256_file(NODE_KUBECTL),
                       DELIVER_KUBECTL)

    def build_layer(layer: Path, work: Path) -> None:
        with tarfile.open(layer, "w") as archive:
            _add_busybox(archive, applets)
            archive.add(NODE_KUBECTL, "bin/kubectl")
            script = tarfile.TarInfo("deliver_kubectl.sh")
            script.size, script.mode = len(DELIVER_KUBECTL), 0o755
            archive.addfile(script, io.BytesIO(DELIVER_KUBECTL.encode()))

    return _cached_build("kubectl-delivery", key, build_layer, ImageConfig(entrypoint=["/deliver_kubectl.sh"]))


# --- root filesystems with pip ----------------------------------------------------------------


def machine_pip_environment() -> tuple[dict[str, str], list[Path]]:
    """This machine's pip configuration as PIP_* variables, and the local paths it refers to."""
    listing = run_step("pip config list", [sys.executable, "-m", "pip", "config", "list"]).stdout
    env: dict[str, str] = {}
    for line in listing.splitlines():
        match = re.fullmatch(r"[^.]+\.([\w-]+)='(.*)'", line.strip())
        if match:  # global.find-links='/opt/wheels' -> PIP_FIND_LINKS=/opt/wheels
            env["PIP_" + match[1].upper().replace("-", "_")] = match[2]
    env.update({key: value for key, value in os.environ.items() if key.startswith("PIP_")})
    return env, sorted({path for value in env.values() for path in _local_paths(value)})


def _local_paths(value: str) -> list[Path]:
    """The existing local directories or files a pip setting refers to. A file:// index URL needs
    the index's whole tree: /opt/pypi/simple links to ../../files/<wheel>, so its parent is kept."""
    paths = []
    for word in value.split():
        path = Path(word.removeprefix("file://"))
        if word.startswith("file://") and path.name == "simple":
            path = path.parent
        if word.startswith(("/", "file:///")) and path.exists():
            paths.append(path)
    return paths


def pip_in_rootfs(rootfs: Path, pip_args: list[str]) -> None:
    """Run the root filesystem's own pip (as root, chrooted) with the machine's pip configuration."""
    env, local_paths = machine_pip_environment()
    # Each path is mounted where pip's settings expect it. One the rootfs has too (the machine's CA
    # bundle, which may hold a local proxy's CA) is only covered while pip runs; missing mount
    # points are made, and removed afterwards.
    made_mount_points, mounts = [], []
    for source in local_paths:
        target = rootfs / source.relative_to("/")
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch() if source.is_file() else target.mkdir()
            made_mount_points.append(target)
        mounts.append(f"mount --bind -o ro {shlex.quote(str(source))} {shlex.quote(str(target))}")
    pip = ["chroot", str(rootfs), "/usr/bin/python3", "-m", "pip", *pip_args]
    script = " && ".join([*mounts, shlex.join(pip)])
    child_env = {"PATH": DEFAULT_PATH, "HOME": "/root", "PIP_BREAK_SYSTEM_PACKAGES": "1",
                 "PIP_NO_CACHE_DIR": "1", "PIP_ROOT_USER_ACTION": "ignore", **env}
    # a private mount namespace: the bind mounts disappear with it, even if pip is killed
    run_step(f"pip {pip_args[0]} in the image", ["unshare", "--mount", "--propagation", "private",
                                              "sh", "-c", script], env=child_env)
    for target in made_mount_points:
        target.unlink() if target.is_file() else target.rmdir()


def debian_rootfs(rootfs: Path, packages: list[str]) -> None:
    """Unpack a Debian root filesystem with ``packages`` into ``rootfs``. mmdebstrap (as root, from
    the machine's mirror) makes it once per package list; the images that share one reuse its tar."""
    base = CACHE / f"rootfs-{_content_key('rootfs', DEBIAN_SUITE, packages)}.tar"
    if not base.exists():
        partial = base.with_suffix(".partial.tar")
        run_step(f"mmdebstrap {DEBIAN_SUITE} (needs root and the mmdebstrap package: bash scripts/build-node.sh)",
             ["mmdebstrap", "--quiet", "--variant=apt", f"--include={','.join(packages)}",
              "--aptopt=APT::Install-Recommends false", "--dpkgopt=path-exclude=/usr/share/doc/*",
              "--dpkgopt=path-exclude=/usr/share/man/*", "--customize-hook=rm -rf \"$1\"/var/lib/apt/lists/*",
              DEBIAN_SUITE, str(partial)])
        partial.rename(base)
    rootfs.mkdir()
    run_step("unpacking the Debian root filesystem", ["tar", "--numeric-owner", "--xattrs", "-xf", str(base),
                                                  "-C", str(rootfs)])


def pinned_requirements(names: tuple[str, ...], file: str = "frameworks.txt") -> list[str]:
    """The ``name==version`` lines for ``names`` from requirements/``file``."""
    pins = {}
    for line in (REPO / "requirements" / file).read_text().splitlines():
        requirement = line.split("#")[0].strip()
        if "==" in requirement:
            pins[requirement.split("==")[0]] = requirement
    return [pins[name] for name in names]


def build_python() -> Path:
    """Debian bookworm's python3 with the pinned CPU frameworks and Hugging Face stack, Debian's Open MPI,
    and the repository's examples/ at EXAMPLES_IN_IMAGE (the real-node tests run the scripts that are in
    the image, as users do)."""
    requirements = [*pinned_requirements(PYTHON_IMAGE_PACKAGES),
                    *pinned_requirements(PYTHON_IMAGE_FINETUNE, "finetune.txt")]
    no_deps = pinned_requirements(PYTHON_IMAGE_NO_DEPS, "frameworks-no-deps.txt")
    return _python_image("python", [*PYTHON_IMAGE_DEBIAN_MPI], requirements, no_deps)


def build_python_frameworks() -> Path:
    """Debian bookworm's python3 with the pinned CPU builds of the other three kinds' frameworks
    (FRAMEWORKS_IMAGE_PACKAGES) and the examples. An image of its own, imported into the node only
    by the tests that train these kinds, so the others neither build nor import it."""
    return _python_image("python-frameworks", [*FRAMEWORKS_IMAGE_DEBIAN], pinned_requirements(FRAMEWORKS_IMAGE_PACKAGES),
                         [])


def _python_image(kind: str, debian_packages: list[str], requirements: list[str], no_deps: list[str]) -> Path:
    """Debian's python3 and pip, ``debian_packages``, the pip ``requirements`` (and ``no_deps``, installed
    without their dependencies), and the repository's examples/ at EXAMPLES_IN_IMAGE."""
    packages = ["python3", "python3-pip", "ca-certificates", *debian_packages]
    examples = [path for path in sorted((REPO / "examples").iterdir()) if path.name not in EXAMPLES_NOT_IN_IMAGE]
    key = _content_key(kind, DEBIAN_SUITE, packages, requirements, no_deps, _context_digest(examples))

    def build_layer(layer: Path, work: Path) -> None:
        rootfs = work / "rootfs"
        debian_rootfs(rootfs, packages)
        pip_in_rootfs(rootfs, ["install", *requirements])
        if no_deps:
            pip_in_rootfs(rootfs, ["install", "--no-deps", *no_deps])
        for path in examples:
            target = rootfs / EXAMPLES_IN_IMAGE.relative_to("/") / path.name
            if path.is_dir():
                shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
        _tar_directory(rootfs, layer)

    config = ImageConfig(entrypoint=["python3"], env={"PYTHONUNBUFFERED": "1", "LANG": "C.UTF-8"})
    return _cached_build(kind, key, build_layer, config)


# --- the controller image ---------------------------------------------------------------------

# The Dockerfile's two RUN steps, which build_controller performs itself (with the rootfs's pip).
# If the Dockerfile's RUN lines change, the build stops and says to update this mapping.
CONTROLLER_RUN_STEPS = (
    "pip wheel --no-cache-dir --wheel-dir /wheels .",
    "pip install --no-cache-dir --no-index /wheels/*.whl && rm -rf /wheels",
)


@dataclass
class Dockerfile:
    """What build_controller reads from controller/Dockerfile: the final stage's settings, the build
    stage's COPY sources (the build context) and every RUN line (to check them against the mapping)."""

    copies: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    user: str = ""
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> "Dockerfile":
        parsed = cls()
        for line in text.splitlines():
            instruction, _, rest = line.strip().partition(" ")
            if instruction == "COPY" and not rest.startswith("--from"):
                parsed.copies.extend(shlex.split(rest)[:-1])
            elif instruction == "RUN":
                parsed.runs.append(rest.strip())
            elif instruction == "ENV":
                parsed.env.update(word.split("=", 1) for word in shlex.split(rest))
            elif instruction == "USER":
                parsed.user = rest.strip()
            elif instruction in ("ENTRYPOINT", "CMD"):
                setattr(parsed, instruction.lower(), json.loads(rest))
        return parsed


def _context_digest(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        for file in sorted([path] if path.is_file() else path.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(REPO)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def build_controller() -> Path:
    """controller/Dockerfile without docker. Stage ``build`` (FROM python:3.11-slim, COPY the context,
    RUN pip wheel) and the final stage (COPY --from=build /wheels, RUN pip install, ENV, USER,
    ENTRYPOINT, CMD) become: one Debian bookworm rootfs with python3 + pip (Python 3.11, as in
    python:3.11-slim); the COPY sources copied to /src in it; the same ``pip wheel`` and
    ``pip install --no-index`` run chrooted in it; /src and /wheels removed; ENV/USER/ENTRYPOINT/CMD
    read from the Dockerfile into the image config. Both stages share one rootfs, so the image
    also holds Debian's pip, which the docker-built image has too (python:3.11-slim ships pip)."""
    dockerfile_text = (REPO / "controller" / "Dockerfile").read_text()
    dockerfile = Dockerfile.parse(dockerfile_text)
    if tuple(dockerfile.runs) != CONTROLLER_RUN_STEPS:
        raise SetupStepError("controller/Dockerfile's RUN steps changed: update CONTROLLER_RUN_STEPS and "
                              "build_controller in tests/cluster/images.py to match them")
    context = [REPO / source for source in dockerfile.copies]
    packages = ["python3", "python3-pip", "ca-certificates"]
    key = _content_key("controller", DEBIAN_SUITE, packages, dockerfile_text, _context_digest(context))

    def build_layer(layer: Path, work: Path) -> None:
        rootfs = work / "rootfs"
        debian_rootfs(rootfs, packages)
        source_dir = rootfs / "src"
        source_dir.mkdir()
        for path in context:  # like .dockerignore: the COPY sources without bytecode caches
            if path.is_dir():
                shutil.copytree(path, source_dir / path.name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(path, source_dir)
        pip_in_rootfs(rootfs, ["wheel", "--wheel-dir", "/wheels", "/src"])
        wheels = sorted(f"/wheels/{wheel.name}" for wheel in (rootfs / "wheels").glob("*.whl"))
        pip_in_rootfs(rootfs, ["install", "--no-index", *wheels])
        run_step("removal of /src and /wheels", ["rm", "-rf", str(source_dir), str(rootfs / "wheels")])
        _tar_directory(rootfs, layer)

    config = ImageConfig(entrypoint=dockerfile.entrypoint, cmd=dockerfile.cmd,
                         env={"LANG": "C.UTF-8", **dockerfile.env}, user=dockerfile.user)
    return _cached_build("controller", key, build_layer, config)


# What every real node imports at its start ...
BUILDERS = {"pause": build_pause, "busybox": build_busybox, "kubectl-delivery": build_kubectl_delivery,
            "python": build_python, "controller": build_controller}
# ... and what it imports only when a test asks for it (RealNode.image); ``python -m tests.cluster.images``
# still builds all of them, so scripts/test.sh's set-up leaves none to build during the tests.
ON_DEMAND_BUILDERS = {"python-frameworks": build_python_frameworks}
ALL_BUILDERS = {**BUILDERS, **ON_DEMAND_BUILDERS}


# The images made from the Kubernetes build's outputs (the source tree's pause.c, the node's kubectl). The
# others need only Debian and pip, so scripts/test.sh builds them beside the Go builds (``--from debian``; on
# a cold machine the python image alone is some ten minutes) and these after them (``--from kube-build``).
FROM_KUBE_BUILD = ("pause", "kubectl-delivery")
SOURCES = {"debian": "the images from Debian packages and pip only",
           "kube-build": "the images from the Kubernetes build's outputs (scripts/build-node.sh)"}


def selected_kinds(argv: list[str]) -> list[str]:
    """The image kinds a command line names: kinds, ``--from debian|kube-build``, or nothing for all."""
    if argv[:1] != ["--from"]:
        return argv or list(ALL_BUILDERS)
    source = argv[1] if len(argv) == 2 else None
    if source not in SOURCES:
        choices = "; ".join(f"{name}: {what}" for name, what in SOURCES.items())
        raise ValueError(f"--from takes one source ({choices})")
    return [kind for kind in ALL_BUILDERS if (kind in FROM_KUBE_BUILD) == (source == "kube-build")]


def main(argv: list[str]) -> int:
    try:
        kinds = selected_kinds(argv)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    unknown = [kind for kind in kinds if kind not in ALL_BUILDERS]
    if unknown:
        print(f"unknown image {unknown[0]!r}: choose from {', '.join(ALL_BUILDERS)}", file=sys.stderr)
        return 2
    for kind in kinds:
        started = time.monotonic()
        try:
            archive = ALL_BUILDERS[kind]()
        except SetupStepError as error:
            print(f"{kind} image: {error}", file=sys.stderr)
            return 2
        size_mb = archive.stat().st_size / 1e6
        print(f"{archive}\t{size_mb:.0f} MB\t{time.monotonic() - started:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
