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

# @openwop/mcp-tasks is clients/typescript, linked (a `file:` dependency): edits to it need no
# reinstall.
if [[ ! -d "$E2E_DIR/node_modules/@modelcontextprotocol/ext-tasks" || ! -e "$E2E_DIR/node_modules/@openwop/mcp-tasks" ]]; then
  echo "e2e: installing client packages (npm ci)" >&2
  (cd "$E2E_DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi

# shellcheck source=../../scripts/lib/demo.sh
source "$REPO_ROOT/scripts/lib/demo.sh"
DEMO_LOG_TAG=e2e
DEMO_READY_TIMEOUT_S="$READY_TIMEOUT_S"
LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/openwop-e2e.XXXXXX")"
NODE_PID=""
LONG_PID=""

cleanup() {
  local rc=$?
  local pid
  for pid in "$NODE_PID" "$LONG_PID"; do
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      # The runner's per-file child processes first, then the runner itself.
      pkill -TERM -P "$pid" 2>/dev/null || true
      kill -TERM "$pid" 2>/dev/null || true
      stop_within 3 "$pid"
    fi
  done
  demo_stop
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

demo_start "$LOG_DIR"
echo "e2e: demo pid $DEMO_PID, MCP_URL=$MCP_URL REST_URL=$REST_URL" >&2

files=()
if [[ $# -gt 0 ]]; then
  for stem in "$@"; do files+=("$E2E_DIR/${stem%.test.mjs}.test.mjs"); done
else
  files=("$E2E_DIR"/*.test.mjs)
fi
# long-call.test.mjs (a 45 s run) and long-task.test.mjs (a 2-minute task) mostly wait and share
# nothing with the other files: they get their own runner, started first, running both files at
# once alongside the rest, so they add little time to the suite.
long=()
rest=()
for f in "${files[@]}"; do
  case "$(basename "$f")" in
    long-call.test.mjs | long-task.test.mjs) long+=("$f") ;;
    *) rest+=("$f") ;;
  esac
done

# In the background plus `wait`, so a SIGINT/SIGTERM to this script is handled at once (bash
# defers traps while a foreground child runs) and the cleanup stops the runners and the demo.
cd "$E2E_DIR"
long_rc=0
if [[ ${#long[@]} -gt 0 ]]; then
  node --test --test-concurrency=2 --test-timeout=180000 "${long[@]}" &
  LONG_PID=$!
fi
rc=0
if [[ ${#rest[@]} -gt 0 ]]; then
  node --test --test-concurrency=1 --test-timeout=60000 "${rest[@]}" &
  NODE_PID=$!
  set +e
  wait "$NODE_PID"
  rc=$?
  set -e
  NODE_PID=""
fi
if [[ -n "$LONG_PID" ]]; then
  set +e
  wait "$LONG_PID"
  long_rc=$?
  set -e
  LONG_PID=""
fi
if [[ $rc -eq 0 ]]; then rc=$long_rc; fi
exit $rc
