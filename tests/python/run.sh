#!/usr/bin/env bash
# The Python client suite: starts `openwop-mcp-sidecar demo` on a free loopback port and drives it
# with the official Python MCP SDK (`mcp`, pinned in requirements.txt) under pytest. Builds
# nothing: point SIDECAR_BIN at a built binary, or build first (`cargo build`, honouring
# CARGO_TARGET_DIR).
#
#   tests/python/run.sh                      # whole suite
#   tests/python/run.sh -k tasks             # any pytest arguments
#   PYTHON_SUITE=sdk1 tests/python/run.sh    # the SDK 1.x suite (tests/python/sdk1: mcp 1.x,
#                                            # the initialize-era revisions), its own venv
#
# Needs only python3 (>= 3.10) with the venv module: the packages come from PyPI into a
# project-local virtualenv (.tools/python-client-venv; .tools/ is gitignored), rebuilt when
# requirements.txt changes. Exit code = pytest's (non-zero as well if the demo cannot start).
set -euo pipefail

PY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$PY_DIR/../.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO_ROOT/target}"
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$REPO_ROOT/$TARGET_DIR" ;; esac
SIDECAR_BIN="${SIDECAR_BIN:-$TARGET_DIR/debug/openwop-mcp-sidecar}"
SUITE_DIR="$PY_DIR"
VENV="$REPO_ROOT/.tools/python-client-venv"
if [[ "${PYTHON_SUITE:-}" == sdk1 ]]; then
  SUITE_DIR="$PY_DIR/sdk1"
  VENV="$REPO_ROOT/.tools/python-sdk1-venv"
fi
REQUIREMENTS="$SUITE_DIR/requirements.txt"

log() { echo "python: $*" >&2; }

if [[ ! -x "$SIDECAR_BIN" ]]; then
  log "sidecar binary not found at $SIDECAR_BIN (build it, or set SIDECAR_BIN)"
  exit 2
fi

# --- the venv (as scripts/check-chart does it) ------------------------------------------------
PYTHON=${PYTHON:-}
if [[ -z "$PYTHON" ]]; then
  for p in python3.13 python3.12 python3.11 python3.10 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      PYTHON=$p
      break
    fi
  done
fi
if [[ -z "$PYTHON" ]]; then
  log "needs python3 >= 3.10 (the mcp SDK's floor); set PYTHON=/path/to/python3"
  exit 2
fi

# Rebuild the venv when the pins change (or the venv is broken), else reuse it: a warm run takes
# a second, a cold one the time of ~35 wheel downloads.
stamp="$VENV/.requirements.sha256"
want="$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  log "creating $VENV ($("$PYTHON" --version 2>&1)) from $REQUIREMENTS"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV" || {
    log "'$PYTHON -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)"
    exit 2
  }
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$REQUIREMENTS"
  echo "$want" >"$stamp"
fi

# The repository's Tasks client (clients/python), installed as users install it, re-installed
# when its sources change. From a copy, so the build leaves nothing in the work tree.
CLIENT_SRC="$REPO_ROOT/clients/python"
[[ "$SUITE_DIR" == "$PY_DIR" ]] || CLIENT_SRC=""
client_stamp="$VENV/.openwop-mcp-tasks.sha256"
client_want=""
[[ -z "$CLIENT_SRC" ]] || client_want="$(cd "$CLIENT_SRC" && find . -type f \( -name '*.py' -o -name '*.toml' -o -name '*.typed' -o -name '*.md' \) \
  -not -path './build/*' -not -path '*.egg-info/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
if [[ -n "$CLIENT_SRC" && "$(cat "$client_stamp" 2>/dev/null)" != "$client_want" ]]; then
  log "installing clients/python (openwop-mcp-tasks) into the venv"
  client_copy="$(mktemp -d "${TMPDIR:-/tmp}/openwop-mcp-tasks.XXXXXX")"
  cp -R "$CLIENT_SRC/." "$client_copy/"
  rm -rf "$client_copy/build" "$client_copy"/src/*.egg-info
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --no-deps --force-reinstall "$client_copy"
  rm -rf "$client_copy"
  echo "$client_want" >"$client_stamp"
fi

# --- the demo ---------------------------------------------------------------------------------
# shellcheck source=../../scripts/lib/demo.sh
source "$REPO_ROOT/scripts/lib/demo.sh"
DEMO_LOG_TAG=python
DEMO_READY_TIMEOUT_S="${PYTHON_READY_TIMEOUT_S:-30}"
LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/openwop-python.XXXXXX")"
PYTEST_PID=""

cleanup() {
  local rc=$?
  if [[ -n "$PYTEST_PID" ]] && kill -0 "$PYTEST_PID" 2>/dev/null; then
    kill -TERM "$PYTEST_PID" 2>/dev/null || true
    stop_within 3 "$PYTEST_PID"
  fi
  demo_stop
  if [[ $rc -ne 0 || -n "${PYTHON_KEEP_LOGS:-}" ]]; then
    log "demo logs kept in $LOG_DIR"
  else
    rm -rf "$LOG_DIR"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

demo_start "$LOG_DIR"
log "demo pid $DEMO_PID, MCP_URL=$MCP_URL REST_URL=$REST_URL, mcp $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')"

# In the background plus `wait`, so a SIGINT/SIGTERM to this script is handled at once (bash
# defers traps while a foreground child runs) and the cleanup stops pytest and the demo.
# No __pycache__ beside the tests (the work tree stays clean; .tools/ holds the venv).
cd "$SUITE_DIR"
PYTHONDONTWRITEBYTECODE=1 "$VENV/bin/python" -m pytest "$@" &
PYTEST_PID=$!
set +e
wait "$PYTEST_PID"
rc=$?
set -e
PYTEST_PID=""
exit $rc
