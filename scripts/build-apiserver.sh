#!/usr/bin/env bash
# A real kube-apiserver (and etcd) for the test suite, from Debian packages only.
#
# No container engine runs on the machines the tests run on, so kind/k3s/minikube cannot start.
# Debian bookworm ships etcd-server and the full Kubernetes source (with vendor/), which builds
# kube-apiserver v1.20.2 with Debian's Go 1.19 in about five minutes on two cores. The binary is
# cached under ~/.cache/trainctl/apiserver/<source version>/, so later runs skip all of this. The
# downloaded, patched source tree and Go's build cache are kept too (scripts/kube-source.sh), for
# scripts/build-node.sh to build the node binaries from the same tree.
#
#   bash scripts/build-apiserver.sh        # idempotent; prints the binary's path last
#   bash scripts/build-apiserver.sh --packages-only   # only the Debian packages (scripts/test.sh's first step)
#
# Facts behind each step: docs/test-cluster.md.
set -euo pipefail
source "$(dirname "$0")/kube-source.sh"
PACKAGES_ONLY=
packages_only_requested "$@" && PACKAGES_ONLY=1

CACHE=${TRAINCTL_APISERVER_CACHE:-$CACHE_ROOT/apiserver/$SOURCE_VERSION}
BINARY=$CACHE/kube-apiserver

# etcd from Debian; the package's own service is not used (tests run their own on loopback).
apt_install etcd-server openssl ca-certificates
command -v kubectl >/dev/null || apt_install kubernetes-client

if [ -x "$BINARY" ] && "$BINARY" --version >/dev/null 2>&1; then
  log "kube-apiserver cached: $BINARY"
  echo "$BINARY"
  exit 0
fi
if [ -n "$PACKAGES_ONLY" ]; then  # and what the build needs
  apt_install "${KUBE_SOURCE_PACKAGES[@]}"
  exit 0
fi

SRC=$(kube_source_tree)
LOGFILE=$(mktemp "${TMPDIR:-/tmp}/trainctl-apiserver-build.XXXXXX.log")
started=$SECONDS
log "building kube-apiserver with -tags=providerless, as the node's binaries (a few minutes on 2 cores; log: $LOGFILE)"
tag=$(kube_make_providerless "$LOGFILE" cmd/kube-apiserver)
seconds=$((SECONDS - started))
rm -f "$LOGFILE"
mkdir -p "$CACHE"
cp "$SRC/_output/local/bin/linux/amd64/kube-apiserver" "$BINARY.tmp"
mv "$BINARY.tmp" "$BINARY"
"$BINARY" --version >/dev/null
printf 'build_tag=%s\nbuild_seconds=%s\n' "$tag" "$seconds" >"$CACHE/build-info.txt"
log "kube-apiserver built in ${seconds}s (build tag: $tag) and cached: $BINARY"
echo "$BINARY"
