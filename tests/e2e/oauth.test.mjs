// The official TypeScript client's OAuth flow (@modelcontextprotocol/client 2.4.0 OAuthClientProvider
// via the transport's `authProvider`, default options) against `demo`, whose devhost is also a demo
// authorization server: from the mount's 401 to a completed tool call and a task, headless, with no
// token handed in by the test.

import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

import { CLIENT_INFO, ENDPOINT_ID, MCP_URL, PROTOCOL_VERSION, TASKS_EXT, getRun, makeRawDispatch, runIdFromResult } from "./lib/harness.mjs";
import { HeadlessProvider } from "./lib/oauth.mjs";

/** Connects an SDK client that logs in by itself as `user`; returns { client, provider }. */
async function logIn(user, capabilities = {}) {
  const provider = new HeadlessProvider(user);
  const make = () =>
    new Client({ name: CLIENT_INFO.name, version: CLIENT_INFO.version }, { capabilities, versionNegotiation: { mode: { pin: PROTOCOL_VERSION } } });
  let client = make();
  let transport = new StreamableHTTPClientTransport(new URL(MCP_URL), { authProvider: provider });
  try {
    await client.connect(transport);
    assert.fail("the first connection, with no token, must meet the 401");
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  assert.ok(provider.callback, "the provider was sent to the authorization endpoint");
  assert.equal(provider.callback.searchParams.get("error"), null, provider.callback.href);
  await transport.finishAuth(provider.callback.searchParams);
  await client.close().catch(() => {});
  client = make();
  transport = new StreamableHTTPClientTransport(new URL(MCP_URL), { authProvider: provider });
  await client.connect(transport);
  return { client, provider };
}

describe("OAuth: the TypeScript SDK client logs in by itself", () => {
  test("from the 401 to a completed tool call, as the demo user who approved", { timeout: 30_000 }, async () => {
    const { client, provider } = await logIn("alice");
    try {
      const auth = provider.seenAuthorizationUrl;
      assert.equal(auth.searchParams.get("code_challenge_method"), "S256");
      assert.equal(auth.searchParams.get("resource"), MCP_URL, "the token is asked for this MCP server (RFC 8707)");
      assert.match(provider.tokens().access_token, /^owat_/);
      const result = await client.callTool({ name: "conformance-noop", arguments: {} });
      assert.notEqual(result.isError, true, JSON.stringify(result));
      const runId = runIdFromResult(result);
      assert.ok(runId, `the result names its run: ${JSON.stringify(result.content)}`);
      const run = await getRun(runId);
      assert.equal(run.status, "completed");
      assert.equal(run.owner.subject.subjectId, "urn:devhost:acme:alice");
      assert.equal(run.owner.subject.lane, "oauth");
    } finally {
      await client.close();
    }
  });

  test("the logged-in client runs a task to completion through ext-tasks", { timeout: 30_000 }, async () => {
    const capabilities = { elicitation: {}, extensions: { [TASKS_EXT]: {} } };
    const { client, provider } = await logIn("alice", capabilities);
    // ext-tasks' raw dispatch posts by itself; it carries the token the SDK obtained.
    const session = createTaskSessionFromClient(client, {
      endpointId: ENDPOINT_ID,
      rawDispatch: makeRawDispatch({ key: provider.tokens().access_token }),
      v2RequestFraming: { protocolVersion: PROTOCOL_VERSION, clientInfo: CLIENT_INFO, clientCapabilities: capabilities },
      onInputRequest: async () => ({ action: "accept", content: { action: "accept" } }),
    });
    try {
      const exec = await session.callTool("conformance-approval", {}, { task: { preference: "require" } });
      assert.equal(exec.kind, "task");
      const { outcome } = await exec.settle();
      assert.equal(outcome.status, "completed", JSON.stringify(outcome));
      const run = await getRun(exec.handle.taskId);
      assert.equal(run.status, "completed");
      assert.equal(run.owner.subject.subjectId, "urn:devhost:acme:alice");
    } finally {
      await session.close();
      await client.close();
    }
  });
});
