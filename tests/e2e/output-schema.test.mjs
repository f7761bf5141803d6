// A tool whose host catalog publishes an outputSchema, called by the official MCP TypeScript
// client (@modelcontextprotocol/client 2.4.0) at its default options: the client validates
// structuredContent against the listed schema and rejects the call on a mismatch (MCP
// 2026-07-28 Tools §Output Schema), so these calls only succeed if the sidecar's structured
// content is the object the schema describes.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";

import { KEYS, connectClient, getRun } from "./lib/harness.mjs";

const TOOL = "structured-greeting";
const META_RUN_ID = "io.openwop/runId";

describe("a tool with an outputSchema (official TypeScript client)", () => {
  let client;
  before(async () => {
    client = await connectClient({ key: KEYS.acme });
  });
  after(async () => {
    await client?.close();
  });

  test("the tool lists the host's closed outputSchema", async () => {
    const { tools } = await client.listTools();
    const tool = tools.find((t) => t.name === TOOL);
    assert.ok(tool, `${TOOL} is listed`);
    assert.equal(tool.outputSchema?.type, "object");
    assert.equal(tool.outputSchema?.additionalProperties, false);
    assert.deepEqual(tool.outputSchema?.required, ["name", "delayMs", "text"]);
  });

  test("callTool validates the structured content and returns it, with the run id in _meta", async () => {
    const result = await client.callTool({ name: TOOL, arguments: { name: "Ada" } });
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.deepEqual(result.structuredContent, { name: "Ada", delayMs: 0, text: "Hello, Ada!" });
    assert.equal(result.content[0].text, "Hello, Ada!");
    assert.deepEqual(JSON.parse(result.content.at(-1).text), result.structuredContent);
    const runId = result._meta?.[META_RUN_ID];
    assert.ok(runId, `the result names its run: ${JSON.stringify(result._meta)}`);
    assert.equal((await getRun(runId)).status, "completed");
  });

  test("a fresh client that never listed tools validates the same call", async () => {
    const fresh = await connectClient({ key: KEYS.acme });
    try {
      const result = await fresh.callTool({ name: TOOL, arguments: { name: "Bo", delayMs: 10 } });
      assert.deepEqual(result.structuredContent, { name: "Bo", delayMs: 10, text: "Hello, Bo!" });
    } finally {
      await fresh.close();
    }
  });
});
