// clients/typescript (`@openwop/mcp-tasks`, linked into this suite as a `file:` dependency, as a
// user installs it) with the official Tasks client (@modelcontextprotocol/ext-tasks): the
// dispatcher's wire, an approval, cancel, a wait timeout that names the task and a resume that
// completes it, the dispatcher's own errors naming the task, and an SSE answer read to its end.
// The 2-minute task at default options is in long-task.test.mjs (run beside the other files).

import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { DispatchError, createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";
import {
  McpDispatchError,
  TASKS_CAPABILITIES,
  TaskWaitTimeoutError,
  createDispatch,
  taskIdOf,
  taskSessionOptions,
  waitForTask,
} from "@openwop/mcp-tasks";

import { CLIENT_INFO, KEYS, MCP_URL, cancelRunQuietly, events, getRun, meta, unproject, waitRunStatus } from "./lib/harness.mjs";

const ACCEPT = Object.freeze({ action: "accept", content: { action: "accept" } });
const REQUIRE_TASK = Object.freeze({ task: { preference: "require" } });

/** An SDK client plus an ext-tasks session built from the package's options, as README shows. */
async function open({ key = KEYS.acme, onInputRequest, fetch } = {}) {
  const client = new Client(CLIENT_INFO, { capabilities: TASKS_CAPABILITIES, versionNegotiation: { mode: "auto" } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(MCP_URL), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }),
  );
  const session = createTaskSessionFromClient(client, {
    ...taskSessionOptions({ url: MCP_URL, token: key, clientInfo: CLIENT_INFO, fetch }),
    ...(onInputRequest ? { onInputRequest } : {}),
  });
  return {
    client,
    session,
    async close() {
      try {
        await session.close();
      } finally {
        await client.close();
      }
    },
  };
}

/** A fetch that records what it sent. */
function recordingFetch(sent) {
  return async (url, init) => {
    sent.push({ headers: new Headers(init.headers), body: JSON.parse(init.body) });
    return fetch(url, init);
  };
}

describe("@openwop/mcp-tasks with ext-tasks", () => {
  test("an approval task: input_required → onInputRequest → tasks/update → completed, with the 2026-07-28 headers", { timeout: 30_000 }, async () => {
    const sent = [];
    const asked = [];
    const s = await open({
      fetch: recordingFetch(sent),
      onInputRequest: async (request, ctx) => {
        asked.push({ request, ctx });
        return ACCEPT;
      },
    });
    let taskId;
    try {
      const exec = await s.session.callTool("conformance-approval", {}, REQUIRE_TASK);
      assert.equal(exec.kind, "task");
      taskId = exec.handle.taskId;
      const { outcome } = await waitForTask(exec);
      assert.equal(outcome.status, "completed", JSON.stringify(outcome));
      assert.notEqual(outcome.result.isError, true);
    } finally {
      if (taskId) await cancelRunQuietly(taskId);
      await s.close();
    }
    assert.equal(asked.length, 1);
    assert.equal(asked[0].ctx.delivery, "task-update");
    assert.equal((await getRun(taskId)).status, "completed");
    assert.equal((await events(unproject(taskId))).filter((e) => e.type === "interrupt.resolved").length, 1);

    const methods = sent.map((r) => r.body.method);
    assert.equal(methods[0], "tools/call");
    assert.ok(methods.includes("tasks/get") && methods.includes("tasks/update"), methods.join(","));
    for (const { headers, body } of sent) {
      assert.equal(headers.get("mcp-protocol-version"), "2026-07-28");
      assert.equal(headers.get("mcp-method"), body.method);
      assert.equal(headers.get("mcp-name"), body.method === "tools/call" ? body.params.name : body.params.taskId);
      assert.equal(headers.get("authorization"), `Bearer ${KEYS.acme}`);
      assert.equal(body.params._meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
      assert.deepEqual(body.params._meta["io.modelcontextprotocol/clientCapabilities"], TASKS_CAPABILITIES);
    }
  });

  test("cancel: execution.cancel() ends the task and the run cancelled", { timeout: 30_000 }, async () => {
    const s = await open();
    let taskId;
    try {
      const exec = await s.session.callTool("conformance-cancellable", {}, REQUIRE_TASK);
      assert.equal(exec.kind, "task");
      taskId = exec.handle.taskId;
      await exec.cancel();
      assert.equal((await waitRunStatus(taskId)).status, "cancelled");
      assert.equal((await s.session.task(taskId).snapshot()).status, "cancelled");
    } finally {
      if (taskId) await cancelRunQuietly(taskId);
      await s.close();
    }
  });

  test("a wait timeout names the task, leaves it running, and a fresh client resumes it to completion", { timeout: 30_000 }, async () => {
    const first = await open();
    let caught;
    let taskId;
    try {
      const exec = await first.session.callTool("conformance-delay", { delayMs: 4000 }, REQUIRE_TASK);
      assert.equal(exec.kind, "task");
      taskId = exec.handle.taskId;
      const began = Date.now();
      await assert.rejects(waitForTask(exec, { timeoutMs: 500 }), (err) => {
        caught = err;
        return err instanceof TaskWaitTimeoutError;
      });
      assert.ok(Date.now() - began < 3_000, "the wait ended at the caller's timeout");
    } finally {
      await first.close();
    }
    assert.equal(caught.taskId, taskId);
    assert.equal(caught.reference.taskId, taskId);
    assert.match(caught.message, new RegExp(taskId.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
    assert.ok(!["cancelled", "failed"].includes((await getRun(taskId)).status), "giving up waiting (and closing) left the run alone");

    const second = await open();
    try {
      const resumed = await second.session.resumeTask(caught.reference);
      assert.equal(resumed.handle.taskId, taskId);
      const { outcome } = await waitForTask(resumed);
      assert.equal(outcome.status, "completed", JSON.stringify(outcome));
      assert.equal((await getRun(taskId)).status, "completed");
    } finally {
      await cancelRunQuietly(taskId);
      await second.close();
    }
  });

  test("after a wait timeout the same session resumes the task by its reference", { timeout: 30_000 }, async () => {
    const s = await open();
    let taskId;
    try {
      const exec = await s.session.callTool("conformance-delay", { delayMs: 3000 }, REQUIRE_TASK);
      taskId = exec.handle.taskId;
      const err = await waitForTask(exec, { timeoutMs: 300 }).then(
        () => assert.fail("the wait outlived its timeout"),
        (e) => e,
      );
      assert.ok(err instanceof TaskWaitTimeoutError, String(err));
      const resumed = await s.session.resumeTask(err.reference);
      const { outcome } = await waitForTask(resumed, { timeoutMs: 20_000 });
      assert.equal(outcome.status, "completed", JSON.stringify(outcome));
    } finally {
      if (taskId) await cancelRunQuietly(taskId);
      await s.close();
    }
  });

  test("the dispatcher's own failures name the task, also through ext-tasks", { timeout: 30_000 }, async () => {
    const taskId = "acme~2Fr-ZZZZZZZZZZZZZZZZZZZZZZZZ";
    // Nothing listens on port 9 (discard) on loopback: the request itself fails.
    const dead = createDispatch({ url: "http://127.0.0.1:9/mcp", token: KEYS.acme });
    await assert.rejects(dead({ method: "tasks/get", params: { taskId, _meta: meta(TASKS_CAPABILITIES) } }), (err) => {
      assert.ok(err instanceof McpDispatchError, String(err));
      assert.equal(err.taskId, taskId);
      assert.equal(err.method, "tasks/get");
      return true;
    });

    // ext-tasks wraps a dispatcher error in its DispatchError; taskIdOf follows the cause.
    const client = new Client(CLIENT_INFO, { capabilities: TASKS_CAPABILITIES, versionNegotiation: { mode: "auto" } });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(MCP_URL), { requestInit: { headers: { Authorization: `Bearer ${KEYS.acme}` } } }),
    );
    const broken = createTaskSessionFromClient(client, {
      ...taskSessionOptions({ url: "http://127.0.0.1:9/mcp", token: KEYS.acme, clientInfo: CLIENT_INFO }),
    });
    try {
      await assert.rejects(broken.task(taskId).snapshot(), (err) => {
        assert.ok(err instanceof DispatchError || err instanceof McpDispatchError, String(err));
        assert.equal(taskIdOf(err), taskId);
        return true;
      });
    } finally {
      await broken.close();
      await client.close();
    }
  });

  test("an answer the sidecar streams as SSE is read to its response, with no time cap", { timeout: 60_000 }, async () => {
    // No Tasks extension on this request: the call blocks, and past the sidecar's JSON window
    // its answer comes as an event stream (keep-alive comments, then the response).
    const dispatch = createDispatch({ url: MCP_URL, token: KEYS.acme });
    const answer = await dispatch({
      method: "tools/call",
      params: { name: "slow_compute", arguments: { seconds: 7, label: "sse" }, _meta: meta({}) },
    });
    assert.equal(answer.kind, "result", JSON.stringify(answer));
    assert.equal(answer.result.content[0].text, "slow_compute sse finished after 7 s");
  });
});
