#!/usr/bin/env bash
# A real kube-apiserver (and etcd) for the test suite, from Debian packages only.
#
# No container engine runs on the machines the tests run on, so kind/k3s/minikube cannot start.
# Debian bookworm ships etcd-server and the full Kubernetes source (with vendor/), which builds
# kube-apiserver v1.20.2 with Debian's Go 1.19 in about five minutes on two cores. The binary is
# cached under ~/.cache/trainctl/apiserver/<source version>/, so later runs skip all of this.
#
#   bash scripts/build-apiserver.sh        # idempotent; prints the binary's path last
#
# Facts behind each step: docs/test-cluster.md.
set -euo pipefail

SOURCE_VERSION=1.20.5+really1.20.2-1.1+deb12u1
CACHE=${TRAINCTL_APISERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainctl/apiserver/$SOURCE_VERSION}
BINARY=$CACHE/kube-apiserver
SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo sudo)

log() { printf '   %s\n' "$*"; }

apt_install() {
  local missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -q >/dev/null
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# etcd from Debian; the package's own service is not used (tests run their own on loopback).
apt_install etcd-server openssl ca-certificates
command -v kubectl >/dev/null || apt_install kubernetes-client

if [ -x "$BINARY" ] && "$BINARY" --version >/dev/null 2>&1; then
  log "kube-apiserver cached: $BINARY"
  echo "$BINARY"
  exit 0
fi

apt_install golang-go rsync make gcc libc6-dev dpkg-dev xz-utils
WORK=$(mktemp -d "${TMPDIR:-/tmp}/trainctl-apiserver.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# `apt-get source` needs a deb-src entry: add one mirroring the configured deb entries.
if ! grep -rqs '^deb-src\|^Types:.*deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  log "adding deb-src entries for the kubernetes source package"
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      | $SUDO tee /etc/apt/sources.list.d/trainctl-deb-src.sources >/dev/null
  else
    grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' \
      | $SUDO tee /etc/apt/sources.list.d/trainctl-deb-src.list >/dev/null
  fi
  $SUDO apt-get update -q >/dev/null
fi

log "downloading Debian's kubernetes $SOURCE_VERSION source (34 MB)"
(cd "$WORK" && apt-get source --download-only "kubernetes=$SOURCE_VERSION" >/dev/null 2>&1)
tar -xzf "$WORK"/kubernetes_*.orig.tar.gz -C "$WORK"
SRC=$(find "$WORK" -maxdepth 1 -type d -name 'kubernetes-*' | head -1)

log "patching vendored reflect2 for Go >= 1.18 (mapiterinit takes a caller-allocated iterator)"
python3 "$(dirname "$0")/patch_reflect2.py" "$SRC/vendor/github.com/modern-go/reflect2"

log "building kube-apiserver (about 5 minutes on 2 cores)"
mkdir -p "$SRC/.go/src/k8s.io"
ln -s "$SRC" "$SRC/.go/src/k8s.io/kubernetes"
(
  cd "$SRC/.go/src/k8s.io/kubernetes"
  export GOPATH=$SRC/.go GO111MODULE=off CGO_ENABLED=0 GOFLAGS= GOCACHE=$WORK/gocache
  make WHAT=cmd/kube-apiserver >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; exit 1; }
)
mkdir -p "$CACHE"
cp "$SRC/_output/local/bin/linux/amd64/kube-apiserver" "$BINARY.tmp"
mv "$BINARY.tmp" "$BINARY"
"$BINARY" --version >/dev/null
log "kube-apiserver built and cached: $BINARY"
echo "$BINARY"
