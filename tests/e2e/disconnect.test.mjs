// Cancellation on streamable HTTP (RFC 0198 §G, MCP 2026-07-28 Cancellation §Streamable HTTP): a client that drops a
// run-starting request before the whole answer arrived cancels that run; once the answer (a task
// handle) has been received, dropping the connection must not touch the run; and the server
// never reports a cancelled run with notifications/cancelled.

import { test, describe } from "node:test";
import assert from "node:assert/strict";

import {
  KEYS,
  MCP_URL,
  PROTOCOL_VERSION,
  TASK_CAPS,
  cancelRunQuietly,
  events,
  freshRun,
  listRuns,
  mcpPost,
  meta,
  parseSse,
  rawHttpPost,
  rest,
  runPath,
  sleep,
  waitRunStatus,
} from "./lib/harness.mjs";

const TERMINAL = ["completed", "failed", "cancelled"];

describe("disconnects", () => {
  test("dropping a blocking tools/call before its answer cancels the run with reason mcp-request-cancelled", { timeout: 30_000 }, async () => {
    const before = await listRuns("conformance-delay");
    const { req, response } = rawHttpPost(
      "tools/call",
      { name: "conformance-delay", arguments: { delayMs: 8000 } },
      { caps: {} },
    );
    let answered = false;
    response.then(
      () => (answered = true),
      () => {},
    );
    let runId;
    try {
      runId = await freshRun("conformance-delay", before, 3_000);
      await sleep(500); // the call is in flight: the sidecar still owes the answer
      assert.equal(answered, false, "the sidecar answered a 8 s call early");
      req.destroy();

      const run = await waitRunStatus(runId, TERMINAL, 15_000);
      assert.equal(run.status, "cancelled");
      const cancelled = (await events(runId)).find((e) => e.type === "run.cancelled");
      assert.ok(cancelled, "run.cancelled event present");
      assert.equal(cancelled.payload?.reason, "mcp-request-cancelled");
    } finally {
      req.destroy();
      if (runId) await cancelRunQuietly(runId);
    }
  });

  test("a task survives the client disconnecting after it received the task handle", { timeout: 30_000 }, async () => {
    const { req, response } = rawHttpPost(
      "tools/call",
      { name: "conformance-delay", arguments: { delayMs: 1500 } },
      { caps: TASK_CAPS, keepAlive: true },
    );
    let taskId;
    try {
      const res = await response;
      assert.equal(res.status, 200);
      assert.match(String(res.headers["content-type"]), /application\/json/);
      const msg = JSON.parse(res.text);
      assert.equal(msg.result?.resultType, "task", res.text);
      taskId = msg.result.taskId;
      assert.equal(typeof taskId, "string");
      req.destroy(); // drop the (kept-alive) connection after the whole answer arrived

      const run = await waitRunStatus(taskId, TERMINAL, 15_000);
      assert.equal(run.status, "completed", "the post-answer disconnect must not cancel the task");
      const got = await mcpPost({ method: "tasks/get", params: { taskId } }, { caps: TASK_CAPS });
      assert.equal(got.message?.result?.status, "completed", JSON.stringify(got.message));
      assert.notEqual(got.message.result.result?.isError, true);
    } finally {
      req.destroy();
      if (taskId) await cancelRunQuietly(taskId);
    }
  });

  test("closing an SSE tools/call stream mid-call cancels the run", { timeout: 30_000 }, async () => {
    const before = await listRuns("conformance-cancellable");
    const ac = new AbortController();
    const pending = fetch(MCP_URL, {
      method: "POST",
      signal: ac.signal,
      headers: sseCallHeaders("conformance-cancellable"),
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: "sse-abort-1",
        method: "tools/call",
        params: { name: "conformance-cancellable", arguments: { delayMs: 20000 }, _meta: meta({}) },
      }),
    });
    pending.catch(() => {});
    let runId;
    try {
      runId = await freshRun("conformance-cancellable", before, 3_000);
      const res = await pending;
      assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/, "SSE headers are sent at once");
      ac.abort();
      const run = await waitRunStatus(runId, TERMINAL, 15_000);
      assert.equal(run.status, "cancelled");
      const cancelled = (await events(runId)).find((e) => e.type === "run.cancelled");
      assert.equal(cancelled?.payload?.reason, "mcp-request-cancelled");
    } finally {
      ac.abort();
      if (runId) await cancelRunQuietly(runId);
    }
  });

  test("a run cancelled over REST ends the open SSE call with isError true and no notifications/cancelled", { timeout: 30_000 }, async () => {
    const before = await listRuns("conformance-cancellable");
    const ac = new AbortController();
    const pending = fetch(MCP_URL, {
      method: "POST",
      signal: ac.signal,
      headers: sseCallHeaders("conformance-cancellable"),
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: "sse-rest-cancel-1",
        method: "tools/call",
        params: { name: "conformance-cancellable", arguments: { delayMs: 20000 }, _meta: meta({}) },
      }),
    });
    pending.catch(() => {});
    const timer = setTimeout(() => ac.abort(), 20_000);
    let runId;
    try {
      runId = await freshRun("conformance-cancellable", before, 3_000);
      const res = await pending;
      assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
      const cancel = await rest(`/runs/${runPath(runId)}/cancel`, { method: "POST", body: {} });
      assert.ok(cancel.status < 300, `REST cancel → ${cancel.status} ${cancel.text}`);
      const messages = parseSse(await res.text());
      assert.equal(
        messages.filter((m) => m.method === "notifications/cancelled").length,
        0,
        "the server sent notifications/cancelled",
      );
      const final = messages.find((m) => m.id === "sse-rest-cancel-1");
      assert.ok(final, `a final response ends the stream: ${JSON.stringify(messages)}`);
      assert.equal(final.result?.isError, true, JSON.stringify(final));
    } finally {
      clearTimeout(timer);
      ac.abort();
      if (runId) await cancelRunQuietly(runId);
    }
  });
});

function sseCallHeaders(name) {
  return {
    "Content-Type": "application/json",
    Accept: "text/event-stream, application/json",
    "MCP-Protocol-Version": PROTOCOL_VERSION,
    "Mcp-Method": "tools/call",
    "Mcp-Name": name,
    Authorization: `Bearer ${KEYS.acme}`,
  };
}
