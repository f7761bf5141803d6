// The official MCP TypeScript client (@modelcontextprotocol/client 2.4.0, pinned to 2026-07-28)
// against the sidecar: discovery, tool listing, blocking tool calls, and MRTR elicitation.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";

import {
  FIXTURES,
  KEYS,
  TASKS_EXT,
  connectClient,
  events,
  getRun,
  runIdFromResult,
  waitRunStatus,
} from "./lib/harness.mjs";

describe("SDK client (2026-07-28, stateless streamable HTTP)", () => {
  let client;
  before(async () => {
    client = await connectClient({ key: KEYS.acme });
  });
  after(async () => {
    await client?.close();
  });

  test("a pinned 2026-07-28 client connects through server/discover and sees the Tasks extension", () => {
    assert.equal(client.getProtocolEra(), "modern");
    const caps = client.getServerCapabilities();
    assert.ok(caps?.tools, "server/discover advertises tools");
    // ext-tasks only turns on 2026-07-28 tasks when the value is exactly {}.
    assert.deepEqual(caps?.extensions?.[TASKS_EXT], {});
  });

  test("tools/list offers every fixture workflow as a tool, sorted by name", async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const f of FIXTURES) assert.ok(names.includes(f), `tools/list lacks ${f}: ${names.join(", ")}`);
    assert.deepEqual(names, [...names].sort(), "tool names are sorted");
    for (const t of tools) assert.equal(t.inputSchema?.type, "object", `${t.name} has an object inputSchema`);
  });

  test("calling a succeeding workflow returns a non-error result backed by a completed run", async () => {
    const result = await client.callTool({ name: "conformance-noop", arguments: {} });
    assert.notEqual(result.isError, true, `isError: ${JSON.stringify(result)}`);
    assert.ok(Array.isArray(result.content) && result.content.length > 0, "result has content");
    const runId = runIdFromResult(result);
    assert.ok(runId, `result names its run: ${JSON.stringify(result.content)}`);
    assert.equal((await getRun(runId)).status, "completed");
  });

  test("a failing workflow is a tool result with isError true, not a thrown protocol error", async () => {
    const result = await client.callTool({ name: "conformance-failure", arguments: {} });
    assert.equal(result.isError, true, JSON.stringify(result));
    assert.ok(result.content.length > 0, "the failure is explained in content");
  });

  test("an unknown tool is a protocol error (rejected call), not a result", async () => {
    await assert.rejects(client.callTool({ name: "no-such-workflow", arguments: {} }), (err) => {
      assert.equal(err.code, -32602, String(err));
      return true;
    });
  });
});

describe("SDK client MRTR: approvals are asked through elicitation/create and auto-fulfilled", () => {
  /** A client declaring elicitation whose handler answers `answer` and records each request. */
  async function approvingClient(answer) {
    const seen = [];
    const client = await connectClient({ key: KEYS.acme, capabilities: { elicitation: {} } });
    client.setRequestHandler("elicitation/create", async (request) => {
      seen.push(request.params);
      return answer;
    });
    return { client, seen };
  }

  test("accepting the approval completes the call with a non-error result and a completed run", async () => {
    const { client, seen } = await approvingClient({ action: "accept", content: { action: "accept" } });
    try {
      const result = await client.callTool({ name: "conformance-approval", arguments: {} });
      assert.equal(seen.length, 1, "the handler was asked exactly once");
      assert.notEqual(seen[0].mode, "url", "the approval is a form elicitation");
      assert.deepEqual(seen[0].requestedSchema?.properties?.action?.enum, ["accept", "reject"]);
      assert.notEqual(result.isError, true, JSON.stringify(result));
      const runId = runIdFromResult(result);
      assert.ok(runId, `result names its run: ${JSON.stringify(result.content)}`);
      const run = await waitRunStatus(runId, ["completed", "failed", "cancelled"], 5_000);
      assert.equal(run.status, "completed");
      const resolved = (await events(runId)).filter((e) => e.type === "interrupt.resolved");
      assert.equal(resolved.length, 1, "exactly one interrupt.resolved");
    } finally {
      await client.close();
    }
  });

  test("a clarification question is asked as a flat form and the answer completes the run", async () => {
    const seen = [];
    const client = await connectClient({ key: KEYS.acme, capabilities: { elicitation: {} } });
    client.setRequestHandler("elicitation/create", async (request) => {
      seen.push(request.params);
      const props = Object.keys(request.params.requestedSchema?.properties ?? {});
      return { action: "accept", content: Object.fromEntries(props.map((k) => [k, "blue"])) };
    });
    try {
      const result = await client.callTool({ name: "conformance-clarification", arguments: {} });
      assert.equal(seen.length, 1, "the handler was asked exactly once");
      assert.notEqual(seen[0].mode, "url");
      assert.equal(seen[0].requestedSchema?.properties?.q1?.type, "string", JSON.stringify(seen[0]));
      assert.notEqual(result.isError, true, JSON.stringify(result));
      const runId = runIdFromResult(result);
      assert.ok(runId, `result names its run: ${JSON.stringify(result.content)}`);
      assert.equal((await waitRunStatus(runId, ["completed", "failed", "cancelled"], 5_000)).status, "completed");
    } finally {
      await client.close();
    }
  });

  test("declining the approval ends the call with isError true and a failed run", async () => {
    const { client, seen } = await approvingClient({ action: "decline" });
    try {
      const result = await client.callTool({ name: "conformance-approval", arguments: {} });
      assert.equal(seen.length, 1, "the handler was asked exactly once");
      assert.equal(result.isError, true, JSON.stringify(result));
      const runId = runIdFromResult(result);
      assert.ok(runId, `result names its run: ${JSON.stringify(result.content)}`);
      assert.equal((await waitRunStatus(runId, ["completed", "failed", "cancelled"], 5_000)).status, "failed");
    } finally {
      await client.close();
    }
  });
});
