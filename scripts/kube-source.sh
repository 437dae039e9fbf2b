# Shared steps for building Kubernetes binaries from Debian's own `kubernetes` source package.
# Sourced (not run) by scripts/build-apiserver.sh and scripts/build-node.sh, so both build from ONE
# downloaded and patched source tree, kept in the cache and reused:
#
#   ~/.cache/trainctl/kubernetes-source/<source version>/
#     kubernetes-<upstream version>/   the patched tree (GOPATH layout under .go/); _output/ holds the
#                                      binaries and Go's build cache (hack/lib/golang.sh sets GOCACHE to
#                                      _output/local/go/cache), so a second binary reuses the packages
#                                      the first one compiled: kube-apiserver after the node's, 62 s
#     .ready                           written last: a half-extracted or half-patched tree is redone
#
# Provides: SOURCE_VERSION, CACHE_ROOT, SUDO, log, apt_install, kube_source_tree, kube_make,
# kube_make_providerless, packages_only_requested.
# Facts behind each step: docs/test-cluster.md and docs/real-node.md.

SOURCE_VERSION=1.20.5+really1.20.2-1.1+deb12u1
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/trainctl
SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo sudo)
KUBE_SOURCE_DIR=$CACHE_ROOT/kubernetes-source/$SOURCE_VERSION
_KUBE_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf '   %s\n' "$*" >&2; }

# Install only the Debian packages that are missing (apt-get update costs seconds; skip it when possible).
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

# `apt-get source` needs a deb-src entry: add one mirroring the configured deb entries.
_ensure_deb_src() {
  grep -rqs '^deb-src\|^Types:.*deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/ && return
  log "adding deb-src entries for the kubernetes source package"
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      | $SUDO tee /etc/apt/sources.list.d/trainctl-deb-src.sources >/dev/null
  else
    grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' \
      | $SUDO tee /etc/apt/sources.list.d/trainctl-deb-src.list >/dev/null
  fi
  $SUDO apt-get update -q >/dev/null
}

# What downloading and building the source tree needs from Debian.
KUBE_SOURCE_PACKAGES=(golang-go rsync make gcc libc6-dev dpkg-dev xz-utils)

# The build scripts' one option: `--packages-only` installs the Debian packages the build and what it makes need,
# and builds nothing. scripts/test.sh runs it first, in the foreground: apt-get takes dpkg's lock, so two at once
# fail, and the builds then run in the background beside the image builds, which need some of these packages.
packages_only_requested() {  # the script's arguments
  case "$*" in
    "") return 1 ;;
    --packages-only) return 0 ;;
    *) echo "unknown argument '$*': the only option is --packages-only (install the Debian packages, build nothing)" >&2
       exit 2 ;;
  esac
}

# Print the path of the patched source tree, downloading and patching it on first use.
kube_source_tree() {
  if [ ! -f "$KUBE_SOURCE_DIR/.ready" ]; then
    apt_install "${KUBE_SOURCE_PACKAGES[@]}"
    _ensure_deb_src
    rm -rf "$KUBE_SOURCE_DIR"
    mkdir -p "$KUBE_SOURCE_DIR/download"
    log "downloading Debian's kubernetes $SOURCE_VERSION source (34 MB)"
    (cd "$KUBE_SOURCE_DIR/download" && apt-get source --download-only "kubernetes=$SOURCE_VERSION" >/dev/null 2>&1)
    tar -xzf "$KUBE_SOURCE_DIR"/download/kubernetes_*.orig.tar.gz -C "$KUBE_SOURCE_DIR"
    rm -rf "$KUBE_SOURCE_DIR/download"
    local src
    src=$(find "$KUBE_SOURCE_DIR" -maxdepth 1 -type d -name 'kubernetes-*' | head -1)
    log "patching vendored reflect2 for Go >= 1.18 (mapiterinit takes a caller-allocated iterator)"
    python3 "$_KUBE_SCRIPTS/patch_reflect2.py" "$src/vendor/github.com/modern-go/reflect2"
    # Kubernetes 1.20 builds in GOPATH mode: the tree must appear as $GOPATH/src/k8s.io/kubernetes.
    mkdir -p "$src/.go/src/k8s.io"
    ln -s "$src" "$src/.go/src/k8s.io/kubernetes"
    touch "$KUBE_SOURCE_DIR/.ready"
  fi
  find "$KUBE_SOURCE_DIR" -maxdepth 1 -type d -name 'kubernetes-*' | head -1
}

# kube_make LOGFILE WHAT [GO_BUILD_FLAGS]: build the commands in WHAT (e.g. "cmd/kubelet cmd/kube-proxy")
# into <tree>/_output/local/bin/linux/amd64/. GO_BUILD_FLAGS reach `go install` through the
# Makefile's GOFLAGS variable (e.g. "-tags=providerless"). On failure the log's tail goes to stderr.
# KUBE_MAKE_IDLE=1 runs the compilers at the lowest CPU and I/O priority, so a long build on a
# shared machine only uses what nothing else wants.
kube_make() {
  local logfile=$1 what=$2 goflags=${3:-} src
  src=$(kube_source_tree)
  (
    if [ "${KUBE_MAKE_IDLE:-0}" = 1 ]; then
      renice -n 19 -p "$BASHPID" >/dev/null
      ionice -c3 -p "$BASHPID"
    fi
    cd "$src/.go/src/k8s.io/kubernetes"
    export GOPATH=$src/.go GO111MODULE=off CGO_ENABLED=0
    make WHAT="$what" GOFLAGS="$goflags" >"$logfile" 2>&1 || { tail -30 "$logfile" >&2; exit 1; }
  )
}

# kube_make_providerless LOGFILE WHAT: kube_make with the `providerless` build tag, which leaves out the legacy
# in-tree cloud providers (the AWS, Azure, GCE, OpenStack and vSphere SDKs: the largest packages a cold build
# compiles, and nothing a test cluster uses), and without the tag if that fails. Prints the tag it built with.
kube_make_providerless() {
  if kube_make "$1" "$2" -tags=providerless; then
    echo providerless
    return
  fi
  log "the providerless build failed; building with the cloud providers"
  kube_make "$1" "$2" || return 1
  echo none
}
