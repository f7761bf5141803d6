# shellcheck shell=bash
# Shared by the suites that drive a running demo (tests/e2e/run.sh, tests/conformance/run.sh,
# tests/python/run.sh): starts `openwop-mcp-sidecar demo` on a free loopback port, waits for its
# `ready` line and reads the MCP and REST URLs off its banner. Source it, then:
#
#   demo_start LOG_DIR [demo args…]   # sets DEMO_PID, DEMO_OUT, DEMO_ERR, MCP_URL, REST_URL,
#                                     # HOST_URL (the demo host itself), exports SIDECAR_BIN
#   demo_stop                         # SIGTERM, SIGKILL after 5 s (call it from the EXIT trap)
#
# Needs SIDECAR_BIN (the built binary) and DEMO_LOG_TAG (the prefix of its messages);
# DEMO_READY_TIMEOUT_S (default 30) bounds the wait for `ready`. On failure it prints the demo's
# output and returns 2; the caller's `set -e` turns that into its exit code.

DEMO_PID=""

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

_demo_dump() {
  sed 's/^/  demo stdout: /' "$DEMO_OUT" >&2 || true
  sed 's/^/  demo stderr: /' "$DEMO_ERR" >&2 || true
}

demo_start() {
  local log_dir=$1
  shift
  local tag="${DEMO_LOG_TAG:-demo}"
  DEMO_OUT="$log_dir/demo.stdout"
  DEMO_ERR="$log_dir/demo.stderr"
  RUST_LOG="${RUST_LOG:-warn}" "$SIDECAR_BIN" demo "$@" --listen 127.0.0.1:0 >"$DEMO_OUT" 2>"$DEMO_ERR" &
  DEMO_PID=$!

  local deadline=$((SECONDS + ${DEMO_READY_TIMEOUT_S:-30}))
  until grep -qx 'ready' "$DEMO_OUT" 2>/dev/null; do
    if ! kill -0 "$DEMO_PID" 2>/dev/null; then
      echo "$tag: the demo exited before it was ready" >&2
      _demo_dump
      return 2
    fi
    if ((SECONDS >= deadline)); then
      echo "$tag: the demo did not print 'ready' within ${DEMO_READY_TIMEOUT_S:-30}s" >&2
      _demo_dump
      return 2
    fi
    sleep 0.1
  done

  MCP_URL="$(sed -n 's/^ *MCP endpoint *: *\(http[^ ]*\).*$/\1/p' "$DEMO_OUT" | head -n1)"
  REST_URL="$(sed -n 's/^ *REST (proxied) *: *\(http[^ ]*\).*$/\1/p' "$DEMO_OUT" | head -n1)"
  REST_URL="${REST_URL%/}"
  if [[ -z "$MCP_URL" || -z "$REST_URL" ]]; then
    echo "$tag: could not read the MCP/REST URLs from the demo banner:" >&2
    cat "$DEMO_OUT" >&2
    return 2
  fi
  # The demo host itself (`stdio --upstream` fronts it directly in the client suites).
  HOST_URL="$(sed -n 's/^.*(demo host itself: *\(http[^ )]*\)).*$/\1/p' "$DEMO_OUT" | head -n1)"
  HOST_URL="${HOST_URL%/}"
  export MCP_URL REST_URL HOST_URL SIDECAR_BIN
}

demo_stop() {
  if [[ -n "$DEMO_PID" ]] && kill -0 "$DEMO_PID" 2>/dev/null; then
    kill -TERM "$DEMO_PID" 2>/dev/null || true
    stop_within 5 "$DEMO_PID"
  fi
}
