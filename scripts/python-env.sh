#!/usr/bin/env bash
# The project's Python virtual environment for tests and tools (the Python SDK's pytest suite,
# the Airflow oracle, the side-by-side bench). It lives outside the clone, in a cache keyed by
# the hash of the committed, fully resolved requirements file, so a second run costs nothing
# and a changed lock file gets a fresh environment.
#
#   scripts/python-env.sh [name]          # create if needed; prints the venv's path on stdout
#   scripts/python-env.sh --check [name]  # prints the path if it exists and is complete, else exits 1
#
# name selects python/requirements/<name>.txt (default: dev). Logs go to stderr.
#
# Tasks never use this environment: they run Debian's /usr/bin/python3, because the uids
# attempts run as cannot traverse a toolchain under a 0700 home (docs/agent.md).
set -euo pipefail
cd "$(dirname "$0")/.."

check_only=0
if [ "${1:-}" = "--check" ]; then
  check_only=1
  shift
fi
name=${1:-dev}
lock="python/requirements/$name.txt"
[ -f "$lock" ] || { echo "python-env: no $lock (run scripts/python-lock.sh $name)" >&2; exit 2; }

python=${LEOFLOW_PYTHON:-python3}
cache=${LEOFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leoflow}
hash=$( (cat "$lock"; "$python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
venv="$cache/python/$name-$hash"

if [ -f "$venv/.complete" ]; then
  echo "$venv"
  exit 0
fi
[ "$check_only" -eq 1 ] && exit 1

command -v "$python" >/dev/null 2>&1 || {
  echo "python-env: $python not found: install Python 3.11 (Debian: apt-get install python3 python3-venv)" >&2
  exit 1
}
started=$(date +%s)
echo "python-env: creating $venv from $lock" >&2
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
  --require-hashes --no-deps -r "$lock" >&2
# Written last: an interrupted install is never mistaken for a complete one.
touch "$venv/.complete"
echo "python-env: ready in $(($(date +%s) - started)) s" >&2
echo "$venv"
