#!/usr/bin/env bash
# Builds the real Kubernetes control plane the tests run against (tools/kube-apiserver: kube-apiserver,
# etcd, kube-controller-manager, kube-scheduler) from the Go module proxy into a cache outside the
# clone, keyed by the Kubernetes version:
#
#   ${LEOFLOW_CACHE_DIR:-~/.cache/leoflow}/kube/<version>/
#     bin/            the four binaries and .inputs (the hash of what built them)
#     gomod/ gocache/ Go's module and build caches for this build only
#
# Idempotent: when bin/.inputs matches the hash of go.mod, go.sum, the mains, the link flags and the
# Go version, it prints the bin directory and exits without building. Concurrent callers (test
# files starting at once) wait on one lock. Progress goes to stderr; the only stdout line is the bin
# directory, so callers can do BIN=$(scripts/kube-build.sh).
#
#   scripts/kube-build.sh --check   prints the bin directory if it is built and up to date, else
#                                   exits 3 without building (what the tests ask before using it)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
src="$here/tools/kube-apiserver"
say() { printf 'kube:build: %s\n' "$*" >&2; }

version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$src/go.mod")
[ -n "$version" ] || { say "cannot read the k8s.io/kubernetes version from $src/go.mod"; exit 1; }
major=${version#v}
major=${major%%.*}
minor=${version#v*.}
minor=${minor%%.*}

cache_root=${LEOFLOW_CACHE_DIR:-$HOME/.cache/leoflow}
cache="$cache_root/kube/$version"
bin="$cache/bin"

if ! command -v go >/dev/null 2>&1; then
  for candidate in /usr/local/go/bin/go /usr/lib/go/bin/go; do
    [ -x "$candidate" ] && export PATH="$(dirname "$candidate"):$PATH" && break
  done
fi
command -v go >/dev/null 2>&1 || { say "go not found: run scripts/go-env.sh (Go 1.26)"; exit 1; }

pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
ldflags+=" -X $pkg.gitCommit=$version"
commands=(kube-apiserver etcd kube-controller-manager kube-scheduler)

inputs() {
  {
    go env GOVERSION
    printf '%s\n' "$ldflags" "${commands[@]}"
    cat "$src/go.mod" "$src/go.sum"
    for c in "${commands[@]}"; do cat "$src/cmd/$c/main.go"; done
  } | sha256sum | cut -d' ' -f1
}
want=$(inputs)

up_to_date() {
  [ -f "$bin/.inputs" ] && [ "$(cat "$bin/.inputs")" = "$want" ] || return 1
  for c in "${commands[@]}"; do [ -x "$bin/$c" ] || return 1; done
}

if up_to_date; then
  echo "$bin"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  say "Kubernetes $version is not built (or is out of date) under $bin: run npm run kube:build"
  exit 3
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -n 9; then
  say "another build of $version is running; waiting for it"
  flock 9
fi
if up_to_date; then
  echo "$bin"
  exit 0
fi

# A cold build needs about 0.7 GB of modules, 2.8 GB of build cache and 0.4 GB of binaries.
need_mb=5000
have_mb=$(df -Pm "$cache" | awk 'NR == 2 { print $4 }')
used_mb=$(du -sm "$cache" 2>/dev/null | cut -f1)
need_mb=$((need_mb - used_mb))
[ "$need_mb" -lt 500 ] && need_mb=500
if [ "$have_mb" -lt "$need_mb" ]; then
  say "needs about $((need_mb / 1024 + 1)) GB free under $cache (it has $((have_mb / 1024)) GB): free some space, or set LEOFLOW_CACHE_DIR to a directory on a larger disk"
  exit 1
fi

say "building Kubernetes $version (${commands[*]}) into $bin; a cold build takes about 5 minutes on 2 cores and 4 GB of disk"
started=$SECONDS
export GOMODCACHE="$cache/gomod" GOCACHE="$cache/gocache" GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false -trimpath"
staging="$cache/bin.new"
rm -rf "$staging"
mkdir -p "$staging"
pkgs=()
for c in "${commands[@]}"; do pkgs+=("./cmd/$c"); done
(cd "$src" && go build -ldflags "$ldflags" -o "$staging/" "${pkgs[@]}")
echo "$want" >"$staging/.inputs"
rm -rf "$bin"
mv "$staging" "$bin"
say "built in $((SECONDS - started)) s: $(du -sh "$bin" | cut -f1) of binaries, $(du -sh "$cache" | cut -f1) under $cache"
echo "$bin"
