#!/usr/bin/env bash
# Prepares a machine for Leoflow's tests: the one command a developer runs on a new machine,
# and the first thing .ci/run does. Idempotent: a second run changes nothing and takes seconds.
#
#   scripts/dev-services.sh          # as root (or with passwordless sudo)
#
# What it does, each step only where it is needed:
#   1. installs the Debian packages the tests use (PostgreSQL, chromium, openssh-server, zsh,
#      fish, bubblewrap, keyutils, gcc and libc6-dev for the sandbox helper, iproute2);
#   2. lets the local test cluster accept password-less connections on 127.0.0.1 and ::1;
#   3. starts PostgreSQL and waits until it answers;
#   4. creates the `test` database the suites connect to
#      (postgres://postgres@127.0.0.1:5432/test, packages/server/test/support/databases.ts).
#
# It prints one line per step with the seconds it took, so .ci/run can report them.
set -euo pipefail

log() { printf '[dev-services] %s\n' "$*"; }
die() {
  printf '[dev-services] error: %s\n' "$*" >&2
  exit 1
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo -n "$@"
  else
    die "this step needs root: run scripts/dev-services.sh as root or with passwordless sudo ($*)"
  fi
}

as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    as_root runuser -u postgres -- "$@"
  fi
}

# Debian package → a file that proves it is installed. One list, one place that knows the
# machine's needs.
PACKAGES=(
  "postgresql:/usr/bin/pg_ctlcluster"      # the PostgreSQL half of every storage test
  "chromium:/usr/bin/chromium"             # the web app's browser tests (playwright-core)
  "openssh-server:/usr/sbin/sshd"          # the ssh runner tests: a real sshd on loopback
  "zsh:/usr/bin/zsh"                       # shell-completion tests
  "fish:/usr/bin/fish"                     # shell-completion tests
  "bubblewrap:/usr/bin/bwrap"              # the attempt sandbox (docs/security.md)
  "keyutils:/usr/bin/keyctl"               # keyring checks in the sandbox tests
  "gcc:/usr/bin/gcc"                       # builds the sandbox helper (packages/agent/native)
  "libc6-dev:/usr/include/stdio.h"         # its C library headers (and libc.a: linked statically)
  "iproute2:/usr/sbin/ip"                  # network namespaces in the fault tests
)

step_started=0
step() {
  step_started=$(date +%s.%N)
  log "$*"
}
step_done() {
  local now
  now=$(date +%s.%N)
  log "$1 took $(awk -v a="$step_started" -v b="$now" 'BEGIN { printf "%.1f", b - a }') s"
}

install_packages() {
  local missing=() entry pkg probe
  for entry in "${PACKAGES[@]}"; do
    pkg=${entry%%:*}
    probe=${entry#*:}
    [ -e "$probe" ] || missing+=("$pkg")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "Debian packages: all present"
    return 0
  fi
  step "installing Debian packages: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
  step_done "packages"
}

cluster_version() {
  ls /etc/postgresql 2>/dev/null | sort -V | tail -n1
}

# Trust authentication on loopback, for this cluster only. Acceptable because this is a
# throwaway local test cluster: it listens on 127.0.0.1/::1 only, holds nothing but test
# schemas that each test file creates and drops, and exists so that tests can connect as
# `postgres` without a password. Never do this on a cluster that holds real data.
configure_trust() {
  local version hba marker
  version=$(cluster_version)
  [ -n "$version" ] || die "PostgreSQL is installed but no cluster exists under /etc/postgresql: run pg_createcluster"
  hba="/etc/postgresql/$version/main/pg_hba.conf"
  marker="# leoflow dev-services: trust on loopback for the throwaway test cluster"
  if as_root grep -qF "$marker" "$hba"; then
    return 1 # already configured: no reload needed
  fi
  log "allowing password-less connections on 127.0.0.1 and ::1 ($hba)"
  # First match wins in pg_hba.conf, so the trust lines go before Debian's scram lines.
  local tmp
  tmp=$(mktemp)
  {
    echo "$marker"
    echo "host    all             all             127.0.0.1/32            trust"
    echo "host    all             all             ::1/128                 trust"
    echo "# end leoflow dev-services"
    as_root cat "$hba"
  } >"$tmp"
  as_root install -m 0640 -o postgres -g postgres "$tmp" "$hba"
  rm -f "$tmp"
  return 0
}

pg_ready() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }

start_postgres() {
  local version reload=0
  version=$(cluster_version)
  if configure_trust; then reload=1; fi
  if pg_ready; then
    if [ "$reload" -eq 1 ]; then
      as_root pg_ctlcluster --skip-systemctl-redirect "$version" main reload
    fi
    log "PostgreSQL $version is running"
    return 0
  fi
  step "starting PostgreSQL $version"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start ||
    die "PostgreSQL did not start: see /var/log/postgresql/postgresql-$version-main.log"
  local i
  for i in $(seq 1 60); do
    pg_ready && break
    sleep 0.5
  done
  pg_ready || die "PostgreSQL started but does not answer on 127.0.0.1:5432 after 30 s"
  step_done "PostgreSQL start"
}

ensure_test_database() {
  if psql -h 127.0.0.1 -U postgres -d test -tAc 'select 1' >/dev/null 2>&1; then
    log "database test answers (postgres://postgres@127.0.0.1:5432/test)"
    return 0
  fi
  log "creating database test"
  as_postgres createdb test 2>/dev/null || true
  psql -h 127.0.0.1 -U postgres -d test -tAc 'select 1' >/dev/null 2>&1 ||
    die "cannot connect to postgres://postgres@127.0.0.1:5432/test without a password: check pg_hba.conf"
  log "database test answers (postgres://postgres@127.0.0.1:5432/test)"
}

install_packages
start_postgres
ensure_test_database
