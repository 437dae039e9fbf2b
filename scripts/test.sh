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
#      kube-scheduler, kube-controller-manager, kube-proxy from the same source (scripts/build-node.sh)
#   4. a virtualenv in .venv with trainctl, its test dependencies and the pinned ML frameworks, and
#      .venv-upstream-sdk with the Kubeflow SDK (requirements/upstream-sdk.txt); the fine-tuning
#      recipe's transformers, peft, datasets, accelerate (requirements/finetune.txt) and deepspeed
#   5. the node's images, built without Docker or a registry (tests/cluster/images.py): pause,
#      busybox, kubectl-delivery (MPI), python (torch, numpy, tensorflow, the Hugging Face stack,
#      Open MPI + mpi4py, examples/), python-frameworks (xgboost, paddlepaddle, jax; imported into the
#      node only by the tests of those kinds) and the controller from controller/Dockerfile's steps
#   6. pytest (the real-node tier starts the node in a network namespace of its own and stops it)
# Each step's line shows the seconds since the start, so cold and cached set-up times can be read off.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== [%ss] %s\n' "$SECONDS" "$*"; }

log "System packages"
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys, venv, ensurepip; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  # a bare Debian/Ubuntu machine: Python 3.11+ with venv and pip from the distribution
  SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3 python3-venv python3-pip
  PYTHON=python3
fi

log "Debian packages and the test kube-apiserver (built once from Debian's source, then cached)"
bash scripts/build-apiserver.sh
export TRAINCTL_REQUIRE_K8S=1  # a missing API server or node fails the k8s tests instead of skipping them

log "The real node's parts (built once from the same source, then cached)"
bash scripts/build-node.sh

log "Python environment (.venv)"
# g++: DeepSpeed builds its CPU communication op with it on first use (the fine-tuning tests' ZeRO-2 run)
(source scripts/kube-source.sh && apt_install g++)
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
VENV_PY=.venv/bin/python
"$VENV_PY" -m pip install -q --upgrade pip >/dev/null
"$VENV_PY" -m pip install -q -e '.[test]'
# Frameworks for the real distributed runs: pinned (plain `torch` would pull a multi-GB CUDA build).
"$VENV_PY" -m pip install -q -r requirements/frameworks.txt
# tf-keras declares a dependency on `tensorflow` (not -cpu); installing it with deps would
# pull a second TensorFlow into the same directory. examples/README.md gives these two installs.
"$VENV_PY" -m pip install -q --no-deps -r requirements/frameworks-no-deps.txt
# The fine-tuning recipe's Hugging Face stack and DeepSpeed (torch is already there: nothing else is pulled for it).
"$VENV_PY" -m pip install -q -r requirements/finetune.txt -r requirements/deepspeed.txt
# The Kubeflow Training Operator's own SDK, for its e2e managed_by test against our CRDs and controller:
# it needs kubernetes<36 and the tests pin 37, so it gets a virtualenv of its own.
if [ ! -x .venv-upstream-sdk/bin/python ]; then
  "$PYTHON" -m venv .venv-upstream-sdk
fi
.venv-upstream-sdk/bin/python -m pip install -q -r requirements/upstream-sdk.txt

log "Images for the real node (built without a registry, then cached)"
"$VENV_PY" -m tests.cluster.images

log "pytest"
set +e
"$VENV_PY" -m pytest -ra "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: treating as a failure" >&2
  status=1
fi
exit "$status"
