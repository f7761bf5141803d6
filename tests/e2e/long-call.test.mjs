// A blocking tool call that outlives the sidecar's JSON window, made by the official MCP
// TypeScript client (@modelcontextprotocol/client) at its DEFAULT options: no timeout, no
// onprogress, no resetTimeoutOnProgress. The client sends `Accept: application/json,
// text/event-stream`; the sidecar answers JSON for quick runs and switches to SSE (keep-alives)
// for slow ones, so a 45 s run comes back as its result in one call, inside the client's own
// 60 s default request timeout (DEFAULT_REQUEST_TIMEOUT_MSEC).
//
// The SDK's own timeout still applies: a call it abandons (here after 7 s) aborts its stream,
// and the sidecar cancels the run the request owned.
//
// The file takes about 53 s: tests/e2e/run.sh runs it in its own runner process, concurrently
// with the other files (which run one at a time).

import { test } from "node:test";
import assert from "node:assert/strict";

import { KEYS, connectClient, events, freshRun, getRun, listRuns, runIdFromResult, waitRunStatus } from "./lib/harness.mjs";

test("a 45 s run completes as one blocking call with the client's default options", { timeout: 120_000 }, async () => {
  const client = await connectClient({ key: KEYS.acme });
  try {
    const started = Date.now();
    const result = await client.callTool({ name: "slow_compute", arguments: { seconds: 45, label: "ts-default" } });
    const took = Date.now() - started;
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.equal(result.content[0].text, "slow_compute ts-default finished after 45 s");
    assert.ok(took >= 45_000, `the answer is the run's result, after ${took} ms`);
    const runId = runIdFromResult(result);
    assert.ok(runId, JSON.stringify(result.content));
    assert.equal((await getRun(runId)).status, "completed");
  } finally {
    await client.close();
  }
});

test("a call the client abandons at its request timeout cancels its run (the request owned it)", { timeout: 60_000 }, async () => {
  const client = await connectClient({ key: KEYS.acme });
  try {
    const before = await listRuns("slow_compute");
    // 7 s: past the demo's 2 s JSON window, so the client gives up during the SSE phase.
    await assert.rejects(
      client.callTool({ name: "slow_compute", arguments: { seconds: 60, label: "ts-abandoned" } }, { timeout: 7_000 }),
      /timed out/i,
    );
    const runId = await freshRun("slow_compute", before);
    assert.equal((await waitRunStatus(runId, ["cancelled", "completed"], 10_000)).status, "cancelled");
    const cancelled = (await events(runId)).find((e) => e.type === "run.cancelled");
    assert.equal(cancelled?.payload?.reason, "mcp-request-cancelled");
  } finally {
    await client.close();
  }
});
