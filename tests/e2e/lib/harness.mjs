// Shared helpers for the end-to-end suite: raw MCP dispatch, SDK client/session factories,
// REST helpers against the proxied OpenWOP host, and polling with deadlines.
//
// The suite is started by run.sh, which exports MCP_URL and REST_URL.

import http from "node:http";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";
import { createDispatch } from "@openwop/mcp-tasks";

export const MCP_URL = requiredEnv("MCP_URL");
export const REST_URL = requiredEnv("REST_URL").replace(/\/+$/, "");
export const PROTOCOL_VERSION = "2026-07-28";
export const TASKS_EXT = "io.modelcontextprotocol/tasks";

/** Demo bearer keys (see `openwop-mcp-sidecar demo`). */
export const KEYS = Object.freeze({
  acme: process.env.E2E_ACME_KEY ?? "acme-dev-key",
  globex: process.env.E2E_GLOBEX_KEY ?? "globex-dev-key",
  acmeApprover: process.env.E2E_ACME_APPROVER_KEY ?? "acme-approver-key",
});

export const CLIENT_INFO = Object.freeze({ name: "openwop-mcp-sidecar-e2e", version: "0.0.0" });

/** The fixture workflows the demo host exposes as MCP tools. */
export const FIXTURES = Object.freeze([
  "conformance-approval",
  "conformance-approval-approvers",
  "conformance-cancellable",
  "conformance-clarification",
  "conformance-delay",
  "conformance-failure",
  "conformance-noop",
]);

/** Capabilities a tasks-capable client declares (what the OpenWOP suite calls TASK_CAPS). */
export const TASK_CAPS = Object.freeze({ elicitation: {}, extensions: { [TASKS_EXT]: {} } });

function requiredEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the suite through tests/e2e/run.sh`);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Waiting

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Calls `probe` every `intervalMs` until it returns something other than `undefined`, or throws
 * an error naming `what` (and the last value seen) once `timeoutMs` has passed.
 */
export async function pollUntil(what, probe, { timeoutMs = 10_000, intervalMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    const v = await probe((seen) => (last = seen));
    if (v !== undefined) return v;
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last seen: ${JSON.stringify(last)}`);
    }
    await sleep(intervalMs);
  }
}

// ---------------------------------------------------------------------------------------------
// Raw MCP over HTTP

let rawSeq = 0;

/** The routing-header value a method carries (`Mcp-Name`), per MCP 2026-07-28 Transports §Request headers and ext-tasks §HTTP. */
export function mcpNameOf(method, params) {
  if (method === "tools/call" || method === "prompts/get") return params?.name;
  if (method === "resources/read") return params?.uri;
  if (method.startsWith("tasks/")) return params?.taskId;
  return undefined;
}

/** Parses a text/event-stream body into the JSON messages of its `data:` fields. */
export function parseSse(text) {
  const out = [];
  for (const ev of text.split(/\r?\n\r?\n/)) {
    const data = ev
      .split(/\r?\n/)
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).replace(/^ /, ""))
      .join("\n");
    if (data.trim()) out.push(JSON.parse(data));
  }
  return out;
}

/** `_meta` for a modern request with the given client capabilities. */
export function meta(caps = {}) {
  return {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    "io.modelcontextprotocol/clientCapabilities": caps,
  };
}

/**
 * POSTs one JSON-RPC request to the MCP endpoint and returns
 * `{ status, contentType, message, messages }` — `message` is the JSON-RPC response whose id
 * matches, `messages` every message seen (SSE may carry several).
 *
 * `request` is `{ method, params, id? }`; params are sent as given (add `_meta` yourself, or pass
 * `caps` to have it added).
 */
export async function mcpPost(request, { key = KEYS.acme, caps, headers = {}, accept, signal } = {}) {
  const id = request.id ?? `e2e-${++rawSeq}`;
  let params = request.params ?? {};
  if (caps !== undefined) params = { ...params, _meta: { ...meta(caps), ...(params._meta ?? {}) } };
  const name = mcpNameOf(request.method, params);
  const res = await fetch(MCP_URL, {
    method: "POST",
    signal,
    body: JSON.stringify({ jsonrpc: "2.0", id, method: request.method, params }),
    headers: {
      "Content-Type": "application/json",
      Accept: accept ?? "application/json, text/event-stream",
      "MCP-Protocol-Version": PROTOCOL_VERSION,
      "Mcp-Method": request.method,
      ...(name !== undefined ? { "Mcp-Name": String(name) } : {}),
      Authorization: `Bearer ${key}`,
      ...headers,
    },
  });
  const contentType = res.headers.get("content-type") ?? "";
  const text = await res.text();
  let messages;
  if (contentType.includes("text/event-stream")) messages = parseSse(text);
  else if (text.trim() === "") messages = [];
  else {
    try {
      messages = [JSON.parse(text)];
    } catch {
      throw new Error(`MCP ${request.method}: HTTP ${res.status} with a non-JSON body: ${text.slice(0, 500)}`);
    }
  }
  const message = messages.find((m) => m && m.id === id && ("result" in m || "error" in m));
  return { status: res.status, contentType, message, messages, id };
}

/**
 * The repository's dispatcher for `@modelcontextprotocol/ext-tasks` (clients/typescript,
 * `@openwop/mcp-tasks`), authenticated with `key`; with `log`, records each request and its
 * answer (or the error thrown).
 */
export function makeRawDispatch({ key = KEYS.acme, log } = {}) {
  const dispatch = createDispatch({ url: MCP_URL, token: key });
  if (!log) return dispatch;
  return async function loggedDispatch(request, options) {
    const { method, params } = request;
    try {
      const answer = await dispatch(request, options);
      log.push({ method, params, answer });
      return answer;
    } catch (error) {
      log.push({ method, params, error });
      throw error;
    }
  };
}

/**
 * A raw Node `http.request` POST (no agent pooling) for the disconnect tests: returns the request
 * object and a promise of the response, so a test can destroy the socket whenever it likes.
 */
export function rawHttpPost(method, params, { key = KEYS.acme, caps = {}, keepAlive = false } = {}) {
  const id = `e2e-raw-${++rawSeq}`;
  const body = JSON.stringify({
    jsonrpc: "2.0",
    id,
    method,
    params: { ...params, _meta: meta(caps) },
  });
  const url = new URL(MCP_URL);
  const name = mcpNameOf(method, params);
  const req = http.request({
    host: url.hostname,
    port: url.port,
    path: url.pathname,
    method: "POST",
    agent: false,
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "content-length": Buffer.byteLength(body),
      "mcp-protocol-version": PROTOCOL_VERSION,
      "mcp-method": method,
      ...(name !== undefined ? { "mcp-name": String(name) } : {}),
      authorization: `Bearer ${key}`,
      connection: keepAlive ? "keep-alive" : "close",
    },
  });
  const response = new Promise((resolve, reject) => {
    req.on("response", (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () =>
        resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
  });
  // A destroyed request rejects `response`; callers that expect that must not see an
  // unhandled rejection.
  response.catch(() => {});
  req.end(body);
  return { req, response, id };
}

// ---------------------------------------------------------------------------------------------
// SDK client and ext-tasks session

/** A connected `@modelcontextprotocol/client` pinned to 2026-07-28, authenticated with `key`. */
export async function connectClient({ key = KEYS.acme, capabilities = {}, name = CLIENT_INFO.name } = {}) {
  const client = new Client(
    { name, version: CLIENT_INFO.version },
    { capabilities, versionNegotiation: { mode: { pin: PROTOCOL_VERSION } } },
  );
  const transport = new StreamableHTTPClientTransport(new URL(MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return client;
}

export const ENDPOINT_ID = "openwop-mcp-sidecar-demo";

/**
 * A fresh SDK client plus an ext-tasks session on it. `onInputRequest` answers task input
 * (`tasks/update`). Close with `closeSession`.
 */
export async function openTaskSession({ key = KEYS.acme, onInputRequest, log } = {}) {
  const capabilities = { elicitation: {}, extensions: { [TASKS_EXT]: {} } };
  const client = await connectClient({ key, capabilities });
  const session = createTaskSessionFromClient(client, {
    endpointId: ENDPOINT_ID,
    rawDispatch: makeRawDispatch({ key, log }),
    v2RequestFraming: { protocolVersion: PROTOCOL_VERSION, clientInfo: CLIENT_INFO, clientCapabilities: capabilities },
    ...(onInputRequest ? { onInputRequest } : {}),
  });
  return { client, session };
}

export async function closeSession({ client, session }) {
  try {
    await session?.close();
  } finally {
    await client?.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Ids

/** `acme~2Fr-xyz` → `acme/r-xyz` (RFC 0184 projected form back to the bound form). */
export function unproject(id) {
  return id.replace(/~([0-9A-Fa-f]{2})/g, (_, h) => String.fromCharCode(parseInt(h, 16)));
}

/** Path segment for a run id in either form: always the `%2F`-encoded bound id. */
export function runPath(runId) {
  return encodeURIComponent(unproject(runId));
}

/** The runId a blocking tools/call result names in its text content, if any. */
export function runIdFromResult(result) {
  for (const c of result?.content ?? []) {
    if (c.type !== "text") continue;
    try {
      const v = JSON.parse(c.text);
      if (typeof v?.runId === "string") return v.runId;
    } catch {
      const m = /"runId"\s*:\s*"([^"]+)"/.exec(c.text);
      if (m) return m[1];
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// REST (through the sidecar's reverse proxy)

export async function rest(path, { key = KEYS.acme, method = "GET", body } = {}) {
  const res = await fetch(`${REST_URL}${path}`, {
    method,
    headers: {
      Accept: "application/json",
      "OpenWOP-Version": "2.0",
      Authorization: `Bearer ${key}`,
      ...(body !== undefined ? { "Content-Type": "application/json" } : {}),
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

/** `GET /runs/{id}` → the RunSnapshot (throws on a non-200). */
export async function getRun(runId, opts) {
  const r = await rest(`/runs/${runPath(runId)}`, opts);
  if (r.status !== 200) throw new Error(`GET /runs/${runPath(runId)} → HTTP ${r.status}: ${r.text}`);
  return r.json;
}

/** The whole event log of a run (`events/poll?timeout=1`). */
export async function events(runId, opts) {
  const r = await rest(`/runs/${runPath(runId)}/events/poll?timeout=1`, opts);
  if (r.status !== 200) throw new Error(`events/poll for ${runId} → HTTP ${r.status}: ${r.text}`);
  return r.json.events;
}

/** Run ids (bound form) of the caller's runs of `workflowId`, newest first. */
export async function listRuns(workflowId, opts) {
  const r = await rest(`/runs?workflowId=${encodeURIComponent(workflowId)}&limit=100`, opts);
  if (r.status !== 200) throw new Error(`GET /runs?workflowId=${workflowId} → HTTP ${r.status}: ${r.text}`);
  return r.json.runs.map((run) => run.runId);
}

/** Polls listRuns until a run not in `before` appears; returns its id. */
export async function freshRun(workflowId, before, timeoutMs = 3_000) {
  const known = new Set(before);
  return pollUntil(
    `a new ${workflowId} run in GET /runs`,
    async (seen) => {
      const ids = await listRuns(workflowId);
      seen(ids.length);
      return ids.find((id) => !known.has(id));
    },
    { timeoutMs, intervalMs: 100 },
  );
}

const TERMINAL = new Set(["completed", "failed", "cancelled"]);

/** Polls GET /runs/{id} until its status is one of `statuses` (default: any terminal one). */
export async function waitRunStatus(runId, statuses = TERMINAL, timeoutMs = 10_000) {
  const want = statuses instanceof Set ? statuses : new Set(statuses);
  const run = await pollUntil(
    `run ${runId} to reach ${[...want].join("|")}`,
    async (seen) => {
      const snap = await getRun(runId);
      seen(snap.status);
      return want.has(snap.status) ? snap : undefined;
    },
    { timeoutMs, intervalMs: 100 },
  );
  return run;
}

/** Cancels a run over REST, ignoring a terminal run (cleanup only). */
export async function cancelRunQuietly(runId) {
  try {
    await rest(`/runs/${runPath(runId)}/cancel`, { method: "POST", body: {} });
  } catch {
    // cleanup is best effort
  }
}
