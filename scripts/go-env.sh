#!/usr/bin/env bash
# Checks that Go is present for the project's Go test tooling (tools/) and prints its version.
# Go builds only test tooling, never shipped code; its caches live outside the clone.
set -euo pipefail
if ! command -v go >/dev/null 2>&1; then
  for candidate in /usr/local/go/bin/go /usr/lib/go/bin/go; do
    if [ -x "$candidate" ]; then
      export PATH="$(dirname "$candidate"):$PATH"
      break
    fi
  done
fi
command -v go >/dev/null 2>&1 || {
  echo "go-env: go not found: install Go 1.26 (https://go.dev/dl/ or Debian's golang) and put it on PATH" >&2
  exit 1
}
go version
