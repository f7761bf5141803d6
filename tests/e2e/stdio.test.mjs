// `openwop-mcp-sidecar stdio` launched by the TypeScript SDK 1.x's own StdioClientTransport, as a
// desktop client launches a local MCP server: the command, its args and the token in its
// environment, every option at its default. The process fronts the demo's host directly.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

import { FIXTURES, KEYS, REST_URL, events, freshRun, getRun, listRuns, runIdFromResult, sleep, waitRunStatus } from "./lib/harness.mjs";

// run.sh exports both; HOST_URL is the demo host itself (REST_URL reaches it through the demo's
// own sidecar, which works as well).
const BIN = process.env.SIDECAR_BIN;
const HOST_URL = process.env.HOST_URL || REST_URL;

async function launch() {
  assert.ok(BIN, "SIDECAR_BIN names the built binary (tests/e2e/run.sh exports it)");
  const client = new Client({ name: "stdio-e2e", version: "1.0.0" }, { capabilities: { elicitation: {} } });
  const asked = [];
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params);
    return { action: "accept", content: { action: "accept" } };
  });
  const transport = new StdioClientTransport({
    command: BIN,
    args: ["stdio", "--upstream", HOST_URL],
    env: { OPENWOP_SIDECAR_TOKEN: KEYS.acme, RUST_LOG: "warn" },
  });
  await client.connect(transport);
  return { client, transport, asked };
}

describe("TypeScript SDK 1.x StdioClientTransport", () => {
  let c;
  before(async () => {
    c = await launch();
  });
  after(async () => {
    await c?.client.close();
  });

  test("connects through initialize and lists every fixture tool", async () => {
    assert.equal(c.client.getServerVersion()?.name, "openwop-mcp-sidecar");
    const { tools } = await c.client.listTools();
    const names = tools.map((t) => t.name);
    for (const f of FIXTURES) assert.ok(names.includes(f), `tools/list lacks ${f}`);
  });

  test("a blocking call is answered", async () => {
    const result = await c.client.callTool({ name: "conformance-delay", arguments: { delayMs: 300 } });
    assert.equal(result.isError, false, JSON.stringify(result));
    assert.equal((await getRun(runIdFromResult(result))).status, "completed");
  });

  test("a call that waits on an approval is answered through the elicitation handler", async () => {
    const result = await c.client.callTool({ name: "confirm_delete", arguments: { filename: "stdio.txt" } });
    assert.equal(result.isError, false, JSON.stringify(result));
    assert.equal(result.content[0].text, "Deleted stdio.txt.");
    assert.ok(c.asked.some((p) => p.requestedSchema?.properties?.action), "the approval was asked as a form");
  });

  test("a task with an approval completes through the experimental tasks API", async () => {
    await c.client.listTools(); // the client learns each tool's taskSupport from the list
    const seen = [];
    let final;
    for await (const m of c.client.experimental.tasks.callToolStream({ name: "conformance-approval", arguments: {} })) {
      seen.push(m.type);
      if (m.type === "result") final = m.result;
      if (m.type === "error") throw m.error;
    }
    assert.equal(seen[0], "taskCreated", seen.join(","));
    assert.equal(final?.isError, false, JSON.stringify(final));
    assert.equal((await getRun(runIdFromResult(final))).status, "completed");
  });

  test("aborting a blocking call sends notifications/cancelled, which cancels its run", { timeout: 30_000 }, async () => {
    const before = await listRuns("conformance-cancellable");
    const abort = new AbortController();
    const call = c.client.callTool({ name: "conformance-cancellable", arguments: { delayMs: 20000 } }, undefined, {
      signal: abort.signal,
    });
    call.catch(() => {});
    const runId = await freshRun("conformance-cancellable", before);
    await waitRunStatus(runId, ["running"], 5_000);
    await sleep(200);
    abort.abort("the user stopped it");
    await assert.rejects(call);
    const run = await waitRunStatus(runId, ["cancelled", "completed"], 15_000);
    assert.equal(run.status, "cancelled");
    const cancelled = (await events(runId)).find((e) => e.type === "run.cancelled");
    assert.equal(cancelled?.payload?.reason, "mcp-request-cancelled");
  });
});
