#!/usr/bin/env bash
# The parts of a real Kubernetes node for the test suite (issue 14), from Debian only: the Debian
# packages a node needs (containerd, runc, CNI plugins, mmdebstrap, ...) and kubelet,
# kube-scheduler, kube-controller-manager and kube-proxy built from the same Debian `kubernetes`
# source tree as the test kube-apiserver (scripts/kube-source.sh downloads and patches it once), and
# a static kubectl for the MPI launcher's kubectl-delivery image (about 3 min more with the Go cache warm).
#
#   bash scripts/build-node.sh        # idempotent; prints the binaries' directory last
#   bash scripts/build-node.sh --packages-only   # only the Debian packages (scripts/test.sh's first step)
#
# The binaries are cached under ~/.cache/trainctl/node/<source version>/ with build-info.txt (build
# tag, seconds). It first tries the `providerless` build tag, which leaves out the legacy in-tree
# cloud providers (AWS, Azure, GCE, vSphere, OpenStack SDKs) that a test node never uses, and builds
# without it if that fails. The Go compilers run at idle CPU/I/O priority (a cold build takes
# tens of minutes on 2 cores). Facts behind each step: docs/real-node.md.
set -euo pipefail
source "$(dirname "$0")/kube-source.sh"
PACKAGES_ONLY=
packages_only_requested "$@" && PACKAGES_ONLY=1

# kubectl is for the MPI launcher's kubectl-delivery image (tests/cluster/images.py), not the node
NODE_COMMANDS=(kubelet kube-scheduler kube-controller-manager kube-proxy kubectl)
CACHE=${TRAINCTL_NODE_CACHE:-$CACHE_ROOT/node/$SOURCE_VERSION}

# Runtime parts of the node; their own services are not used (the fixture starts its own daemons).
apt_install containerd runc containernetworking-plugins mmdebstrap busybox-static iptables \
  conntrack socat dnsmasq-base ipset gcc libc6-dev

runs() {  # kubectl has no --version
  if [ "$1" = kubectl ]; then "$CACHE/$1" version --client; else "$CACHE/$1" --version; fi >/dev/null
}

cached() {
  local command
  for command in "${NODE_COMMANDS[@]}"; do
    runs "$command" 2>/dev/null || return 1
  done
}

if cached; then
  log "node binaries cached: $CACHE"
  echo "$CACHE"
  exit 0
fi
if [ -n "$PACKAGES_ONLY" ]; then  # and what the build needs
  apt_install "${KUBE_SOURCE_PACKAGES[@]}"
  exit 0
fi

SRC=$(kube_source_tree)
WHAT=$(printf 'cmd/%s ' "${NODE_COMMANDS[@]}")
LOGFILE=$(mktemp "${TMPDIR:-/tmp}/trainctl-node-build.XXXXXX.log")
export KUBE_MAKE_IDLE=1
started=$SECONDS
log "building ${NODE_COMMANDS[*]} with -tags=providerless (log: $LOGFILE; ~20 min cold on 2 cores)"
tag=$(kube_make_providerless "$LOGFILE" "$WHAT")
seconds=$((SECONDS - started))

mkdir -p "$CACHE"
for command in "${NODE_COMMANDS[@]}"; do
  cp "$SRC/_output/local/bin/linux/amd64/$command" "$CACHE/$command.tmp"
  mv "$CACHE/$command.tmp" "$CACHE/$command"
  runs "$command"
done
printf 'build_tag=%s\nbuild_seconds=%s\n' "$tag" "$seconds" >"$CACHE/build-info.txt"
log "node binaries built in ${seconds}s (build tag: $tag) and cached: $CACHE"
echo "$CACHE"
