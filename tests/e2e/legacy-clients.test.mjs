// The clients most people run speak the initialize-era revisions: the TypeScript SDK 1.x
// (@modelcontextprotocol/sdk, pinned to the latest 1.x) and the TypeScript v2 client at its
// default negotiation ('legacy'). Both connect to the same endpoint as the 2026-07-28 clients,
// at their default options, and complete a call that waits on an approval.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";

import { Client as Sdk1Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as Sdk1Transport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { UnauthorizedError as Sdk1Unauthorized } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from "@modelcontextprotocol/client";

import { FIXTURES, KEYS, MCP_URL, getRun, runIdFromResult, unproject, waitRunStatus } from "./lib/harness.mjs";
import { HeadlessProvider } from "./lib/oauth.mjs";

/** An SDK 1.x client as its README sets it up, with a bearer and an approving elicitation handler. */
async function connectSdk1({ key = KEYS.acme, approve = "accept" } = {}) {
  const client = new Sdk1Client({ name: "sdk1-e2e", version: "1.0.0" }, { capabilities: { elicitation: {} } });
  const asked = [];
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params);
    return { action: "accept", content: { action: approve } };
  });
  const transport = new Sdk1Transport(new URL(MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return { client, transport, asked };
}

describe("TypeScript SDK 1.x (initialize era, 2025-11-25)", () => {
  let c;
  before(async () => {
    c = await connectSdk1();
  });
  after(async () => {
    await c?.client.close();
  });

  test("connects through initialize, negotiates 2025-11-25 and sees 2025-11-25 Tasks", () => {
    assert.equal(c.transport.protocolVersion, "2025-11-25");
    assert.equal(c.client.getServerVersion()?.name, "openwop-mcp-sidecar");
    const caps = c.client.getServerCapabilities();
    assert.ok(caps?.tools, "tools are offered");
    assert.deepEqual(caps?.tasks?.requests?.tools?.call, {}, "task-augmented tools/call is offered");
    assert.ok(c.transport.sessionId, "a session id came with the answer to initialize");
  });

  test("lists every fixture tool with its task support", async () => {
    const { tools } = await c.client.listTools();
    const names = tools.map((t) => t.name);
    for (const f of FIXTURES) assert.ok(names.includes(f), `tools/list lacks ${f}`);
    for (const t of tools) {
      assert.ok(["optional", "required", "forbidden"].includes(t.execution?.taskSupport), `${t.name}: ${JSON.stringify(t.execution)}`);
    }
  });

  test("a blocking call that waits on an approval is answered through the elicitation handler", async () => {
    const result = await c.client.callTool({ name: "confirm_delete", arguments: { filename: "sdk1.txt" } });
    assert.equal(result.isError, false, JSON.stringify(result));
    assert.equal(result.content[0].text, "Deleted sdk1.txt.");
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
    assert.ok(final, `a result: ${seen.join(",")}`);
    assert.equal(final.isError, false, JSON.stringify(final));
    const runId = runIdFromResult(final);
    assert.equal((await getRun(runId)).status, "completed");
  });

  test("a task's taskId is the run's id, readable with tasks/get and cancellable with tasks/cancel", async () => {
    await c.client.listTools();
    const stream = c.client.experimental.tasks.callToolStream(
      { name: "conformance-cancellable", arguments: { delayMs: 20000 } },
      undefined,
      { task: {} },
    );
    const first = await stream.next();
    assert.equal(first.value?.type, "taskCreated", JSON.stringify(first.value));
    const taskId = first.value.task.taskId;
    await stream.return();
    const got = await c.client.experimental.tasks.getTask(taskId);
    assert.equal(got.status, "working");
    const cancelled = await c.client.experimental.tasks.cancelTask(taskId);
    assert.equal(cancelled.status, "cancelled");
    assert.equal((await waitRunStatus(unproject(taskId), ["cancelled"])).status, "cancelled");
  });
});

describe("TypeScript v2 client at its default negotiation", () => {
  test("connects, lists tools and completes a call that waits on an approval", async () => {
    const client = new V2Client({ name: "v2-default", version: "1.0.0" }, { capabilities: { elicitation: {} } });
    const asked = [];
    client.setRequestHandler("elicitation/create", async (request) => {
      asked.push(request.params);
      return { action: "accept", content: { action: "accept" } };
    });
    const transport = new V2Transport(new URL(MCP_URL), {
      requestInit: { headers: { Authorization: `Bearer ${KEYS.acme}` } },
    });
    await client.connect(transport);
    try {
      assert.equal(client.getProtocolEra(), "legacy");
      const { tools } = await client.listTools();
      assert.ok(tools.some((t) => t.name === "conformance-noop"));
      const result = await client.callTool({ name: "conformance-noop", arguments: {} });
      assert.equal(result.isError, false, JSON.stringify(result));
      const approved = await client.callTool({ name: "confirm_delete", arguments: { filename: "v2.txt" } });
      assert.equal(approved.isError, false, JSON.stringify(approved));
      assert.equal(approved.content[0].text, "Deleted v2.txt.");
      assert.equal(asked.length, 1, "the approval was asked once, by elicitation/create on the call's stream");
    } finally {
      await client.close();
    }
  });
});

describe("MCP Inspector CLI", () => {
  // The Inspector's command-line mode, as a user runs it against a URL with a bearer header.
  const inspector = async (...args) => {
    const { execFile } = await import("node:child_process");
    const { mkdtempSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const home = mkdtempSync(join(tmpdir(), "inspector-home-"));
    const bin = new URL("./node_modules/.bin/mcp-inspector", import.meta.url).pathname;
    return await new Promise((resolve, reject) => {
      execFile(
        bin,
        ["--cli", MCP_URL, "--header", `Authorization: Bearer ${KEYS.acme}`, ...args],
        { env: { ...process.env, HOME: home }, timeout: 60_000 },
        (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout))),
      );
    });
  };

  test("lists the tools and calls one", async () => {
    const { tools } = await inspector("--method", "tools/list");
    assert.ok(tools.some((t) => t.name === "conformance-noop"), JSON.stringify(tools.map((t) => t.name)));
    const result = await inspector("--method", "tools/call", "--tool-name", "conformance-noop");
    assert.equal(result.isError, false, JSON.stringify(result));
    assert.equal((await getRun(runIdFromResult(result))).status, "completed");
  });
});

describe("OAuth: the TypeScript SDK 1.x client logs in by itself", () => {
  test("from the 401 on initialize to a completed tool call, as the demo user who approved", { timeout: 30_000 }, async () => {
    const provider = new HeadlessProvider("alice");
    const make = () => new Sdk1Client({ name: "sdk1-oauth", version: "1.0.0" }, { capabilities: {} });
    let client = make();
    let transport = new Sdk1Transport(new URL(MCP_URL), { authProvider: provider });
    await assert.rejects(client.connect(transport), (err) => err instanceof Sdk1Unauthorized, "the handshake meets the 401");
    assert.ok(provider.callback, "the provider was sent to the authorization endpoint");
    assert.equal(provider.callback.searchParams.get("error"), null, provider.callback.href);
    assert.equal(provider.seenAuthorizationUrl.searchParams.get("resource"), MCP_URL, "the token is asked for this MCP server (RFC 8707)");
    await transport.finishAuth(provider.callback.searchParams.get("code"));
    await client.close().catch(() => {});
    client = make();
    transport = new Sdk1Transport(new URL(MCP_URL), { authProvider: provider });
    await client.connect(transport);
    try {
      assert.equal(transport.protocolVersion, "2025-11-25");
      const result = await client.callTool({ name: "conformance-noop", arguments: {} });
      assert.notEqual(result.isError, true, JSON.stringify(result));
      const run = await getRun(runIdFromResult(result));
      assert.equal(run.status, "completed");
      assert.equal(run.owner.subject.subjectId, "urn:devhost:acme:alice");
      assert.equal(run.owner.subject.lane, "oauth");
    } finally {
      await client.close();
    }
  });
});
