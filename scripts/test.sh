#!/usr/bin/env bash
# The whole test suite on a fresh machine, setup included (this is the README's test command).
#
#   bash scripts/test.sh            # everything: unit, local backend, frameworks, real kube-apiserver
#   bash scripts/test.sh -k status  # extra arguments go to pytest
#
# Steps, each idempotent and cached so a second run starts testing within seconds:
#   1. Debian packages and a kube-apiserver built from Debian's own source (scripts/build-apiserver.sh)
#   2. a virtualenv in .venv with trainctl, its test dependencies and the pinned ML frameworks
#   3. pytest
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }

log "Debian packages and the test kube-apiserver"
bash scripts/build-apiserver.sh

log "Python environment (.venv)"
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
VENV_PY=.venv/bin/python
"$VENV_PY" -m pip install -q --upgrade pip >/dev/null
"$VENV_PY" -m pip install -q -e '.[test]'
# Frameworks for the real distributed runs: pinned (plain `torch` would pull a multi-GB CUDA build).
"$VENV_PY" -m pip install -q -r requirements/frameworks.txt
# tf-keras declares a dependency on `tensorflow` (not -cpu); installing it with deps would
# pull a second TensorFlow into the same directory.
"$VENV_PY" -m pip install -q --no-deps tf-keras==2.21.0

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
