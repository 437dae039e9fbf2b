#!/usr/bin/env bash
# The whole test suite on a fresh machine, setup included (this is the README's test command).
#
#   bash scripts/test.sh            # everything: unit, local backend, frameworks, real kube-apiserver,
#                                   # and real pods on a real node (tests/realnode; needs root)
#   bash scripts/test.sh -k status  # extra arguments go to pytest
#
# Steps, each idempotent and cached so a second run starts testing within seconds:
#   1. Python 3.11+ with venv from the distribution if missing
#   2. Debian packages and a kube-apiserver built from Debian's own source (scripts/build-apiserver.sh)
#   3. the real node's parts: containerd, runc, CNI plugins, dnsmasq ... from Debian, and kubelet,
#      kube-scheduler, kube-controller-manager, kube-proxy from the same source (scripts/build-node.sh);
#      2 and 3 install their Debian packages first, then build in the background while steps 4 and 5 run
#   4. a virtualenv with trainctl, its test dependencies and the pinned ML frameworks, and one with the
#      Kubeflow SDK (requirements/upstream-sdk.txt); the fine-tuning recipe's transformers, peft, datasets,
#      accelerate (requirements/finetune.txt) and deepspeed. Both are kept in ~/.cache/trainctl/venvs/, named by
#      the hash of what they install, and linked as .venv and .venv-upstream-sdk
#   5. the node's images, built without Docker or a registry (tests/cluster/images.py): pause,
#      busybox, kubectl-delivery (MPI), python (torch, numpy, tensorflow, the Hugging Face stack,
#      Open MPI + mpi4py, examples/), python-frameworks (xgboost, paddlepaddle, jax; imported into the
#      node only by the tests of those kinds) and the controller from controller/Dockerfile's steps: those
#      beside the builds, then pause and kubectl-delivery, which need what the builds make
#   6. pytest in two processes (TRAINCTL_TEST_PROCESSES=N for another count; tests/tiers.py says which tests
#      go together): the real-node tier starts the node in a network namespace of its own and stops it
# Each step's line shows the seconds since the start, and the end of the output the seconds of each step and of
# each tier, so cold and cached times can be read off (docs/test-cluster.md, "The suite's time").
set -euo pipefail
cd "$(dirname "$0")/.."

STEP_NAMES=() STEP_STARTS=()
log() {
  STEP_NAMES+=("${1%% (*}") STEP_STARTS+=("$SECONDS")
  printf '\n== [%ss] %s\n' "$SECONDS" "$*"
}
# The seconds of each step, printed after pytest's own summary (docs/test-cluster.md records them).
step_times() {
  local i end
  echo
  echo "== time per step"
  for i in "${!STEP_NAMES[@]}"; do
    end=${STEP_STARTS[$((i + 1))]:-$SECONDS}
    printf '%6ss  %s\n' "$((end - STEP_STARTS[i]))" "${STEP_NAMES[$i]}"
  done
  printf '%6ss  in all\n' "$SECONDS"
}

log "System packages"
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys, venv, ensurepip; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  # a bare Debian/Ubuntu machine: Python 3.11+ with venv and pip from the distribution
  SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3 python3-venv python3-pip
  PYTHON=python3
fi

log "Debian packages; the test kube-apiserver and the real node's parts start building (once, then cached)"
# g++: DeepSpeed builds its CPU communication op with it on first use (the fine-tuning tests' ZeRO-2 run). It is
# installed before the builds start: they install Debian packages too, and two apt-gets at once fail on its lock.
(source scripts/kube-source.sh && apt_install g++)
# Every Debian package first, in the foreground (two apt-gets at once fail on dpkg's lock); the builds
# then run in the background.
bash scripts/build-apiserver.sh --packages-only >/dev/null
bash scripts/build-node.sh --packages-only >/dev/null
# The Go builds (CPU) run beside the virtualenvs' installs and the images that need no Kubernetes build
# (downloads, unpacking, pip in a root filesystem): on a cold machine that takes their minutes off the set-up; on
# a warm one all of them only check their caches. Their output comes after the venvs'.
BUILD_LOG=$(mktemp -t trainctl-builds.XXXXXX)
IMAGES_LOG=$(mktemp -t trainctl-images.XXXXXX)
(bash scripts/build-apiserver.sh && bash scripts/build-node.sh) >"$BUILD_LOG" 2>&1 &
BUILDS=$! IMAGES=
trap 'kill $BUILDS $IMAGES 2>/dev/null || true' EXIT  # a failed step below leaves no build running on
# wait_for PID LOG WHAT: the background step's output, and its failure as this script's
wait_for() {
  local status=0
  wait "$1" || status=$?
  cat "$2"
  rm -f "$2"
  if [ "$status" -ne 0 ]; then
    echo "$3 failed (exit $status): its output is above" >&2
    exit "$status"
  fi
}
export TRAINCTL_REQUIRE_K8S=1  # a missing API server or node fails the k8s tests instead of skipping them

log "Python environments (.venv and .venv-upstream-sdk, cached by what they install), beside the builds; then the images"
# Each virtualenv lives in ~/.cache/trainctl/venvs/, named by the hash of what goes into it (the install steps
# below and the files they read): a fresh clone links .venv to the one made before and only points its
# editable trainctl at itself, in seconds, instead of reinstalling torch, TensorFlow and the rest.
install_test_dependencies() {  # $1: the new virtualenv's python
  "$1" -m pip install -q --upgrade pip >/dev/null
  "$1" -m pip install -q -e '.[test]'
  # Frameworks for the real distributed runs: pinned (plain `torch` would pull a multi-GB CUDA build).
  "$1" -m pip install -q -r requirements/frameworks.txt
  # tf-keras declares a dependency on `tensorflow` (not -cpu); installing it with deps would
  # pull a second TensorFlow into the same directory. examples/README.md gives these two installs.
  "$1" -m pip install -q --no-deps -r requirements/frameworks-no-deps.txt
  # The fine-tuning recipe's Hugging Face stack and DeepSpeed (torch is already there: nothing else is pulled for it).
  "$1" -m pip install -q -r requirements/finetune.txt -r requirements/deepspeed.txt
}
# The Kubeflow Training Operator's own SDK, for its e2e managed_by test against our CRDs and controller:
# it needs kubernetes<36 and the tests pin 37, so it gets a virtualenv of its own.
install_upstream_sdk() {
  "$1" -m pip install -q -r requirements/upstream-sdk.txt
}
cached_venv() {  # $1: the link in the clone, $2: the install function, $3...: the files it reads
  local link=$1 install=$2 key dir
  shift 2
  key=$( { "$PYTHON" -VV; declare -f "$install"; cat "$@"; } | sha256sum | cut -c1-16)
  dir=${XDG_CACHE_HOME:-$HOME/.cache}/trainctl/venvs/${link#.}-$key
  if [ ! -f "$dir/.complete" ]; then
    echo "   making $dir"
    rm -rf "$dir"
    "$PYTHON" -m venv "$dir"
    "$install" "$dir/bin/python"
    touch "$dir/.complete"
  fi
  if [ "$(readlink "$link" || true)" != "$dir" ]; then
    rm -rf "$link"
    ln -s "$dir" "$link"
  fi
}
cached_venv .venv install_test_dependencies pyproject.toml requirements/frameworks.txt \
  requirements/frameworks-no-deps.txt requirements/finetune.txt requirements/deepspeed.txt
VENV_PY=.venv/bin/python
# the real node's images from Debian and pip (built without a registry, then cached) start now, beside the builds
"$VENV_PY" -m tests.cluster.images --from debian >"$IMAGES_LOG" 2>&1 &
IMAGES=$!
cached_venv .venv-upstream-sdk install_upstream_sdk requirements/upstream-sdk.txt
# the cached virtualenv's editable trainctl is this clone's (nothing else is installed: its dependencies are)
"$VENV_PY" -m pip install -q --no-deps -e .

log "The test kube-apiserver and the real node's parts (built once from Debian's source, then cached)"
wait_for "$BUILDS" "$BUILD_LOG" "building the test kube-apiserver or the real node's parts"

log "Images from the Kubernetes build (pause, kubectl-delivery), and waiting for the others"
"$VENV_PY" -m tests.cluster.images --from kube-build
wait_for "$IMAGES" "$IMAGES_LOG" "building the real node's images"

log "pytest"
# Two processes (pytest-xdist): the real node's tests in one, one after another, the other modules spread over
# both, each module whole (tests/tiers.py); every test's own time and each tier's sum are printed at the end.
# pytest runs from the cached virtualenv's own path, not through the .venv link: torch builds JIT extensions
# (DeepSpeed's CPU communication op, the fine-tuning tests' ZeRO-2 run) with the interpreter's site-packages
# in the compiler's command line and rebuilds them when that line changes, which through .venv it did in every
# new clone (45 to 175 s). Their builds are kept beside that virtualenv, so they go with it.
VENV_DIR=$(readlink -f .venv)
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$VENV_DIR/torch-extensions}
# Bytecode for the clone's own modules, once (~1 CPU-s): where PYTHONDONTWRITEBYTECODE is set (this project's
# machines set it) no process writes any, and each of the suite's thousands of trainctl processes (CLI calls,
# supervisors, function runners) compiled trainctl's sources again: a CLI call ~0.3 CPU-s more. compileall writes
# them whatever that variable says; a source edited later is compiled afresh, as without them.
"$VENV_DIR/bin/python" -m compileall -q -j 0 trainctl tests >/dev/null
set +e
"$VENV_DIR/bin/python" -m pytest -ra -n "${TRAINCTL_TEST_PROCESSES:-2}" --dist loadscope --durations=40 "$@"
status=$?
set -e
step_times
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: treating as a failure" >&2
  status=1
fi
exit "$status"
