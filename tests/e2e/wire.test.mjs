// Raw-wire guarantees a generic HTTP client relies on (OpenWOP conformance v2-mcp-mount-map, MCP 2026-07-28 Transports §HTTP status codes):
// authentication, header/body agreement, capability gating, cacheable lists.

import { test, describe } from "node:test";
import assert from "node:assert/strict";

import {
  KEYS,
  MCP_URL,
  REST_URL,
  PROTOCOL_VERSION,
  TASK_CAPS,
  TASKS_EXT,
  cancelRunQuietly,
  events,
  listRuns,
  mcpPost,
  meta,
  rest,
  runIdFromResult,
} from "./lib/harness.mjs";

describe("MCP wire", () => {
  test("a request without a bearer is refused with 401/403 before any MCP handling", async () => {
    const res = await fetch(MCP_URL, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "tools/list",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: meta({}) } }),
    });
    await res.arrayBuffer();
    assert.ok([401, 403].includes(res.status), `HTTP ${res.status}`);
  });

  test("server/discover is cacheable and lists exactly the supported revision", async () => {
    const { status, message } = await mcpPost({ method: "server/discover", params: {} }, { caps: {} });
    assert.equal(status, 200);
    const r = message.result;
    assert.equal(r.resultType, "complete");
    assert.deepEqual(r.supportedVersions, [PROTOCOL_VERSION]);
    assert.deepEqual(r.capabilities.extensions, { [TASKS_EXT]: {} });
    assert.equal(typeof r.ttlMs, "number");
    assert.ok(["public", "private"].includes(r.cacheScope));
  });

  test("the host's discovery document advertises the mount, its profile and the Tasks feature", async () => {
    const r = await rest("/.well-known/openwop");
    assert.equal(r.status, 200, r.text);
    const mcp = r.json.mcp;
    assert.ok(mcp?.serverMount, JSON.stringify(mcp));
    assert.ok(mcp.profiles?.includes("mcp-2026-07-28"));
    for (const f of ["server-discover", "mrtr", "cacheable-lists", "extensions"]) {
      assert.ok(mcp.features?.includes(f), `mcp.features lacks ${f}: ${JSON.stringify(mcp.features)}`);
    }
    const url = new URL(mcp.serverUrls?.[0], REST_URL);
    assert.equal(url.pathname, new URL(MCP_URL).pathname, "serverUrls[0] names the MCP endpoint");
  });

  test("an MRTR requestState is single use and integrity protected", async () => {
    const call = (extra) =>
      mcpPost({ method: "tools/call", params: { name: "conformance-approval", arguments: {}, ...extra } }, { caps: { elicitation: {} } });
    const first = await call({});
    const { requestState, inputRequests } = first.message?.result ?? {};
    assert.equal(first.message?.result?.resultType, "input_required", JSON.stringify(first.message));
    assert.equal(typeof requestState, "string");
    const keys = Object.keys(inputRequests);
    assert.equal(keys.length, 1);
    assert.match(keys[0], /^[^/]+\/[A-Za-z0-9._~-]{16,128}$/, "the input key is the interruptId");
    const accept = { [keys[0]]: { action: "accept", content: { action: "accept" } } };

    const tampered = await call({ requestState: requestState + "x", inputResponses: accept });
    assert.ok(tampered.message?.error || tampered.status >= 400, `tampered state accepted: ${JSON.stringify(tampered.message)}`);

    const ok = await call({ requestState, inputResponses: accept });
    assert.deepEqual(
      [ok.message?.error, ok.message?.result?.resultType, ok.message?.result?.isError],
      [undefined, "complete", false],
      JSON.stringify(ok.message),
    );
    const replay = await call({ requestState, inputResponses: accept });
    assert.ok(replay.message?.error || replay.status >= 400, `replayed state accepted: ${JSON.stringify(replay.message)}`);
  });

  test("tools/list is stateless and stable: two calls return identical tools, private cache scope", async () => {
    const a = await mcpPost({ method: "tools/list", params: {} }, { caps: {} });
    const b = await mcpPost({ method: "tools/list", params: {} }, { caps: {} });
    assert.equal(a.status, 200);
    assert.equal(a.message.result.resultType, "complete");
    assert.equal(a.message.result.cacheScope, "private");
    assert.ok(Number.isInteger(a.message.result.ttlMs) && a.message.result.ttlMs >= 0);
    assert.equal(JSON.stringify(a.message.result.tools), JSON.stringify(b.message.result.tools));
  });

  test("a routing header that disagrees with the body is HTTP 400 / -32020", async () => {
    const r = await mcpPost(
      { method: "tools/call", params: { name: "conformance-noop", arguments: {} } },
      { caps: {}, headers: { "Mcp-Name": "not-conformance-noop" } },
    );
    assert.deepEqual([r.status, r.message?.error?.code], [400, -32020]);
  });

  test("an unsupported revision is HTTP 400 / -32022 naming the supported ones", async () => {
    const r = await mcpPost(
      { method: "tools/list", params: { _meta: { ...meta({}), "io.modelcontextprotocol/protocolVersion": "1999-01-01" } } },
      { headers: { "MCP-Protocol-Version": "1999-01-01" } },
    );
    assert.deepEqual([r.status, r.message?.error?.code], [400, -32022]);
    assert.deepEqual(r.message.error.data?.supported, [PROTOCOL_VERSION]);
  });

  test("an approval workflow is refused with -32021 to a client that cannot answer elicitation", async () => {
    const r = await mcpPost({ method: "tools/call", params: { name: "conformance-approval", arguments: {} } }, { caps: {} });
    assert.equal(r.message?.error?.code, -32021, JSON.stringify(r.message));
    assert.equal(r.status, 400);
  });

  test("task methods from a request that does not declare the Tasks extension are -32021", async () => {
    const r = await mcpPost({ method: "tasks/get", params: { taskId: "acme~2Fr-ZZZZZZZZZZZZZZZZZZZZZZZZ" } }, { caps: {} });
    assert.equal(r.message?.error?.code, -32021, JSON.stringify(r.message));
    assert.deepEqual(r.message.error.data?.requiredCapabilities, { extensions: { [TASKS_EXT]: {} } });
  });

  test("a client without the Tasks extension never gets a task back", async () => {
    const r = await mcpPost(
      { method: "tools/call", params: { name: "conformance-delay", arguments: { delayMs: 200 } } },
      { caps: {} },
    );
    assert.equal(r.status, 200);
    assert.notEqual(r.message?.result?.resultType, "task", JSON.stringify(r.message));
    assert.equal(r.message.result.resultType, "complete");
  });

  test("tools/call with non-object arguments is -32602 and starts no run", async () => {
    const before = await listRuns("conformance-noop");
    const r = await mcpPost(
      { method: "tools/call", params: { name: "conformance-noop", arguments: "not-an-object" } },
      { caps: TASK_CAPS, key: KEYS.acme },
    );
    assert.equal(r.message?.error?.code, -32602, JSON.stringify(r.message));
    assert.deepEqual(await listRuns("conformance-noop"), before, "a run was created");
  });

  for (const fixture of ["conformance-clarification-nested", "conformance-clarification-sensitive"]) {
    test(`${fixture}: a question that is not a flat, non-secret form is never sent as a form (isError without URL mode)`, async () => {
      const r = await mcpPost({ method: "tools/call", params: { name: fixture, arguments: {} } }, { caps: { elicitation: {} } });
      const runId = runIdFromResult(r.message?.result);
      try {
        assert.equal(r.message?.error, undefined, JSON.stringify(r.message));
        assert.equal(r.message.result.isError, true, JSON.stringify(r.message));
        assert.equal(r.message.result.inputRequests, undefined);
        assert.doesNotMatch(JSON.stringify(r.message), /"mode":"form"/);
      } finally {
        if (runId) await cancelRunQuietly(runId);
      }
    });
  }

  test(
    "a run started over MCP records run.started.transport = mcp",
    { todo: "REST-only sidecar: POST /runs has no transport field, so the host records rest (OpenWOP v2 spec/v2/core (runs.md, interop.md), M6)" },
    async () => {
      const r = await mcpPost({ method: "tools/call", params: { name: "conformance-noop", arguments: {} } }, { caps: {} });
      const runId = runIdFromResult(r.message?.result);
      assert.ok(runId);
      const started = (await events(runId)).find((e) => e.type === "run.started");
      assert.equal(started?.payload?.transport, "mcp");
    },
  );
});
