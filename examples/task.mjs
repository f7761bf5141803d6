// Run a tool as an MCP task to completion with the official TypeScript client
// (@modelcontextprotocol/client) and Tasks client (@modelcontextprotocol/ext-tasks), both pinned
// in tests/e2e/package.json, answering the approval the run asks for on the way.
//
//   MCP_URL=http://127.0.0.1:8080/mcp MCP_KEY=acme-dev-key node examples/task.mjs
//
// (run it where those packages resolve, e.g. copied into tests/e2e/ after `npm ci` there).
// tests/e2e/examples.test.mjs runs this file against the demo, so the README cannot drift.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

const url = new URL(process.env.MCP_URL ?? "http://127.0.0.1:8080/mcp");
const key = process.env.MCP_KEY ?? "acme-dev-key";
const capabilities = { elicitation: {}, extensions: { "io.modelcontextprotocol/tasks": {} } };

// The client's default negotiation is the legacy `initialize` handshake, which a 2026-07-28-only
// server refuses: "auto" starts with server/discover instead.
const client = new Client(
  { name: "example", version: "1.0.0" },
  { capabilities, versionNegotiation: { mode: "auto" } },
);
await client.connect(
  new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${key}` } } }),
);
// ext-tasks sends its task requests itself (the "raw dispatch" of the Tasks extension's client
// guide): it has stamped `_meta`; this adds the id, the routing headers (MCP 2026-07-28
// "HTTP headers": Mcp-Method, and Mcp-Name = tool name or taskId) and the bearer.
let seq = 0;
async function rawDispatch({ method, params }, options = {}) {
  const name = method === "tools/call" ? params?.name : method.startsWith("tasks/") ? params?.taskId : undefined;
  const res = await fetch(url, {
    method: "POST",
    signal: options.signal,
    body: JSON.stringify({ jsonrpc: "2.0", id: `example-${++seq}`, method, params }),
    headers: {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": "2026-07-28",
      "Mcp-Method": method,
      ...(name !== undefined ? { "Mcp-Name": String(name) } : {}),
      Authorization: `Bearer ${key}`,
      ...(options.context?.headers ?? {}),
    },
  });
  const text = await res.text();
  // A JSON body, or an SSE stream whose last `data:` line is the response.
  const body = (res.headers.get("content-type") ?? "").includes("text/event-stream")
    ? text.split("\n").filter((l) => l.startsWith("data:")).map((l) => JSON.parse(l.slice(5))).findLast((m) => "id" in m)
    : JSON.parse(text);
  return body.error ? { kind: "error", error: body.error } : { kind: "result", result: body.result };
}

const session = createTaskSessionFromClient(client, {
  endpointId: url.href,
  rawDispatch,
  v2RequestFraming: {
    protocolVersion: "2026-07-28",
    clientInfo: { name: "example", version: "1.0.0" },
    clientCapabilities: capabilities,
  },
  // The run's approval arrives as a task input request; answered here with tasks/update.
  onInputRequest: async (request) => {
    console.log("asked:", request.params?.message ?? request.kind);
    return { action: "accept", content: { action: "accept" } };
  },
});
try {
  const exec = await session.callTool("conformance-approval", {}, { task: { preference: "require" } });
  console.log("task:", exec.handle.taskId);
  const { outcome } = await exec.settle();
  console.log("final:", outcome.status, outcome.result.structuredContent.status);
} finally {
  await session.close();
  await client.close();
}
