#!/usr/bin/env bash
# End-to-end suite: starts `openwop-mcp-sidecar demo` on a free loopback port and drives it with
# the official MCP clients (node --test). Builds nothing: point SIDECAR_BIN at a built binary, or
# build first (`cargo build`, honouring CARGO_TARGET_DIR).
#
#   tests/e2e/run.sh                 # whole suite
#   tests/e2e/run.sh tasks           # only tests/e2e/tasks.test.mjs (any *.test.mjs name stem)
#
# Exit code = the test runner's exit code (non-zero as well if the demo cannot be started).
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$E2E_DIR/../.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO_ROOT/target}"
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$REPO_ROOT/$TARGET_DIR" ;; esac
SIDECAR_BIN="${SIDECAR_BIN:-$TARGET_DIR/debug/openwop-mcp-sidecar}"
READY_TIMEOUT_S="${E2E_READY_TIMEOUT_S:-30}"

if [[ ! -x "$SIDECAR_BIN" ]]; then
  echo "e2e: sidecar binary not found at $SIDECAR_BIN (build it, or set SIDECAR_BIN)" >&2
  exit 2
fi

if [[ ! -d "$E2E_DIR/node_modules/@modelcontextprotocol/ext-tasks" ]]; then
  echo "e2e: installing client packages (npm ci)" >&2
  (cd "$E2E_DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi

LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/openwop-e2e.XXXXXX")"
DEMO_OUT="$LOG_DIR/demo.stdout"
DEMO_ERR="$LOG_DIR/demo.stderr"
DEMO_PID=""
NODE_PID=""

# stop_within SECONDS PID: wait for PID to exit, SIGKILL it after SECONDS.
stop_within() {
  local i
  for ((i = 0; i < $1 * 10; i++)); do
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$2" 2>/dev/null || true
  wait "$2" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  if [[ -n "$NODE_PID" ]] && kill -0 "$NODE_PID" 2>/dev/null; then
    # The runner's per-file child processes first, then the runner itself.
    pkill -TERM -P "$NODE_PID" 2>/dev/null || true
    kill -TERM "$NODE_PID" 2>/dev/null || true
    stop_within 3 "$NODE_PID"
  fi
  if [[ -n "$DEMO_PID" ]] && kill -0 "$DEMO_PID" 2>/dev/null; then
    kill -TERM "$DEMO_PID" 2>/dev/null || true
    stop_within 5 "$DEMO_PID"
  fi
  if [[ $rc -ne 0 || -n "${E2E_KEEP_LOGS:-}" ]]; then
    echo "e2e: demo logs kept in $LOG_DIR" >&2
  else
    rm -rf "$LOG_DIR"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

RUST_LOG="${RUST_LOG:-warn}" "$SIDECAR_BIN" demo --listen 127.0.0.1:0 >"$DEMO_OUT" 2>"$DEMO_ERR" &
DEMO_PID=$!

deadline=$((SECONDS + READY_TIMEOUT_S))
until grep -qx 'ready' "$DEMO_OUT" 2>/dev/null; do
  if ! kill -0 "$DEMO_PID" 2>/dev/null; then
    echo "e2e: the demo exited before it was ready" >&2
    sed 's/^/  demo stdout: /' "$DEMO_OUT" >&2 || true
    sed 's/^/  demo stderr: /' "$DEMO_ERR" >&2 || true
    exit 2
  fi
  if ((SECONDS >= deadline)); then
    echo "e2e: the demo did not print 'ready' within ${READY_TIMEOUT_S}s" >&2
    sed 's/^/  demo stdout: /' "$DEMO_OUT" >&2 || true
    sed 's/^/  demo stderr: /' "$DEMO_ERR" >&2 || true
    exit 2
  fi
  sleep 0.1
done

MCP_URL="$(sed -n 's/^ *MCP endpoint *: *\(http[^ ]*\).*$/\1/p' "$DEMO_OUT" | head -n1)"
REST_URL="$(sed -n 's/^ *REST (proxied) *: *\(http[^ ]*\).*$/\1/p' "$DEMO_OUT" | head -n1)"
REST_URL="${REST_URL%/}"
if [[ -z "$MCP_URL" || -z "$REST_URL" ]]; then
  echo "e2e: could not read the MCP/REST URLs from the demo banner:" >&2
  cat "$DEMO_OUT" >&2
  exit 2
fi
export MCP_URL REST_URL
echo "e2e: demo pid $DEMO_PID, MCP_URL=$MCP_URL REST_URL=$REST_URL" >&2

files=()
if [[ $# -gt 0 ]]; then
  for stem in "$@"; do files+=("$E2E_DIR/${stem%.test.mjs}.test.mjs"); done
else
  files=("$E2E_DIR"/*.test.mjs)
fi

# In the background plus `wait`, so a SIGINT/SIGTERM to this script is handled at once (bash
# defers traps while a foreground child runs) and the cleanup stops the runner and the demo.
cd "$E2E_DIR"
node --test --test-concurrency=1 --test-timeout=60000 "${files[@]}" &
NODE_PID=$!
set +e
wait "$NODE_PID"
rc=$?
set -e
NODE_PID=""
exit $rc
