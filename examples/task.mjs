// Run a tool as an MCP task to completion with the official TypeScript client
// (@modelcontextprotocol/client), the official Tasks client (@modelcontextprotocol/ext-tasks)
// and the repository's dispatcher for it (clients/typescript, `npm install ./clients/typescript`),
// answering the approval the run asks for on the way.
//
//   MCP_URL=http://127.0.0.1:8080/mcp MCP_KEY=acme-dev-key node examples/task.mjs
//
// (run it where those packages resolve, e.g. tests/e2e/ after `npm ci` there).
// tests/e2e/examples.test.mjs runs this file against the demo, so the README cannot drift.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";
import { TASKS_CAPABILITIES, taskSessionOptions, waitForTask } from "@openwop/mcp-tasks";

const url = process.env.MCP_URL ?? "http://127.0.0.1:8080/mcp";
const key = process.env.MCP_KEY ?? "acme-dev-key";
const clientInfo = { name: "example", version: "1.0.0" };

// The client's default negotiation is the legacy `initialize` handshake, which a 2026-07-28-only
// server refuses: "auto" starts with server/discover instead.
const client = new Client(clientInfo, { capabilities: TASKS_CAPABILITIES, versionNegotiation: { mode: "auto" } });
await client.connect(
  new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }),
);
// ext-tasks sends its task requests through a "raw dispatch"; taskSessionOptions gives it the
// package's (MCP 2026-07-28 headers, bearer, JSON or SSE answers, no time cap of its own).
const session = createTaskSessionFromClient(client, {
  ...taskSessionOptions({ url, token: key, clientInfo }),
  // The run's approval arrives as a task input request; answered here with tasks/update.
  onInputRequest: async (request) => {
    console.log("asked:", request.params?.message ?? request.kind);
    return { action: "accept", content: { action: "accept" } };
  },
});
try {
  const exec = await session.callTool("conformance-approval", {}, { task: { preference: "require" } });
  console.log("task:", exec.handle.taskId);
  // waitForTask(exec, { timeoutMs }) would throw TaskWaitTimeoutError carrying the taskId and a
  // reference for session.resumeTask; without timeoutMs it waits as long as the task runs.
  const { outcome } = await waitForTask(exec);
  console.log("final:", outcome.status, outcome.result.structuredContent.status);
} finally {
  await session.close();
  await client.close();
}
