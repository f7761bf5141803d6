// subscriptions/listen with the Tasks filter (RFC 0208, subscriptions/listen, T9; MCP 2026-07-28 Subscriptions; ext-tasks §notifications/tasks):
// the owner is acknowledged and pushed the task's state as it changes; another tenant's listen
// for the same id is acknowledged without it and never notified.

import { test, describe } from "node:test";
import assert from "node:assert/strict";

import {
  KEYS,
  MCP_URL,
  PROTOCOL_VERSION,
  TASK_CAPS,
  cancelRunQuietly,
  mcpPost,
  meta,
  pollUntil,
} from "./lib/harness.mjs";

const SUB_META = "io.modelcontextprotocol/subscriptionId";

/**
 * Opens a listen stream and collects its messages as they arrive. `messages` grows live;
 * `waitFor(pred, ms)` resolves with the first message matching; `close()` aborts the stream.
 */
async function openListen(id, taskIds, { key = KEYS.acme, caps = TASK_CAPS } = {}) {
  const ac = new AbortController();
  const res = await fetch(MCP_URL, {
    method: "POST",
    signal: ac.signal,
    headers: {
      "Content-Type": "application/json",
      Accept: "text/event-stream, application/json",
      "MCP-Protocol-Version": PROTOCOL_VERSION,
      "Mcp-Method": "subscriptions/listen",
      Authorization: `Bearer ${key}`,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id,
      method: "subscriptions/listen",
      params: { notifications: { taskIds }, _meta: meta(caps) },
    }),
  });
  const messages = [];
  let ended = false;
  const contentType = res.headers.get("content-type") ?? "";
  const pump = (async () => {
    if (!contentType.includes("text/event-stream")) {
      messages.push(JSON.parse(await res.text()));
      return;
    }
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk, { stream: true });
      let cut;
      while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
        const frame = buf.slice(0, cut);
        buf = buf.slice(cut).replace(/^\r?\n\r?\n/, "");
        const data = frame
          .split(/\r?\n/)
          .filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).replace(/^ /, ""))
          .join("\n");
        if (data.trim()) messages.push(JSON.parse(data));
      }
    }
  })()
    .catch(() => {})
    .finally(() => (ended = true));
  return {
    status: res.status,
    contentType,
    messages,
    get ended() {
      return ended;
    },
    waitFor: (what, pred, timeoutMs = 5_000) =>
      pollUntil(what, async (seen) => {
        seen(messages);
        return messages.find(pred);
      }, { timeoutMs, intervalMs: 50 }),
    close: async () => {
      ac.abort();
      await pump;
    },
  };
}

async function startApprovalTask() {
  const r = await mcpPost({ method: "tools/call", params: { name: "conformance-approval", arguments: {} } }, { caps: TASK_CAPS });
  assert.equal(r.message?.result?.resultType, "task", JSON.stringify(r.message));
  return r.message.result.taskId;
}

describe("subscriptions/listen for tasks", () => {
  test("the owner's listen acknowledges the task first and pushes its state until it completes", { timeout: 30_000 }, async () => {
    const taskId = await startApprovalTask();
    const listen = await openListen("listen-owner-1", [taskId]);
    try {
      assert.equal(listen.status, 200);
      assert.match(listen.contentType, /text\/event-stream/);
      const ack = await listen.waitFor("the acknowledgement", () => true);
      assert.equal(ack.method, "notifications/subscriptions/acknowledged", "the first message is the ack");
      assert.equal(ack.params?._meta?.[SUB_META], "listen-owner-1");
      assert.deepEqual(ack.params?.notifications?.taskIds, [taskId]);

      const waiting = await listen.waitFor(
        "a notifications/tasks with input_required",
        (m) => m.method === "notifications/tasks" && m.params?.taskId === taskId && m.params?.status === "input_required",
      );
      assert.equal(waiting.params._meta?.[SUB_META], "listen-owner-1");
      const key = Object.keys(waiting.params.inputRequests ?? {})[0];
      assert.ok(key, `inputRequests pushed: ${JSON.stringify(waiting.params)}`);

      const upd = await mcpPost(
        { method: "tasks/update", params: { taskId, inputResponses: { [key]: { action: "accept", content: { action: "accept" } } } } },
        { caps: TASK_CAPS },
      );
      assert.equal(upd.message?.result?.resultType, "complete", JSON.stringify(upd.message));
      const done = await listen.waitFor(
        "a notifications/tasks with completed",
        (m) => m.method === "notifications/tasks" && m.params?.taskId === taskId && m.params?.status === "completed",
      );
      assert.notEqual(done.params.result?.isError, true, JSON.stringify(done.params));
      assert.equal(
        listen.messages.filter((m) => m.method === "notifications/cancelled").length,
        0,
        "notifications/cancelled on a listen stream",
      );
    } finally {
      await listen.close();
      await cancelRunQuietly(taskId);
    }
  });

  test("another tenant's listen for the same task is acknowledged without it and never notified", { timeout: 30_000 }, async () => {
    const taskId = await startApprovalTask();
    const foreign = await openListen("listen-foreign-1", [taskId], { key: KEYS.globex });
    try {
      const ack = await foreign.waitFor("the acknowledgement", () => true);
      assert.equal(ack.method, "notifications/subscriptions/acknowledged", JSON.stringify(ack));
      assert.deepEqual(ack.params?.notifications?.taskIds ?? [], []);
      // Move the task while the foreign stream is open: nothing about it may reach globex.
      await mcpPost({ method: "tasks/cancel", params: { taskId } }, { caps: TASK_CAPS });
      const owner = await mcpPost({ method: "tasks/get", params: { taskId } }, { caps: TASK_CAPS });
      assert.equal(owner.message?.result?.status, "cancelled");
      await new Promise((r) => setTimeout(r, 1_500)); // a negative check: give a leak time to show
      assert.equal(foreign.messages.filter((m) => m.method === "notifications/tasks").length, 0, JSON.stringify(foreign.messages));
    } finally {
      await foreign.close();
      await cancelRunQuietly(taskId);
    }
  });

  test("a listen naming taskIds without declaring the Tasks extension is -32021", async () => {
    const r = await mcpPost(
      { method: "subscriptions/listen", params: { notifications: { taskIds: ["acme~2Fr-ZZZZZZZZZZZZZZZZZZZZZZZZ"] } } },
      { caps: {}, accept: "text/event-stream, application/json" },
    );
    assert.equal(r.message?.error?.code, -32021, JSON.stringify(r.messages));
  });
});
