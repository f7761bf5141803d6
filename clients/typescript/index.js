// A raw dispatcher for @modelcontextprotocol/ext-tasks against an MCP 2026-07-28 server over
// Streamable HTTP (openwop-mcp-sidecar's mount), plus a wait with a caller-chosen timeout whose
// error carries the taskId.
//
// ext-tasks sends task traffic (tools/call as a task, tasks/get|update|cancel) through a
// host-supplied `rawDispatch` (RawClientDispatch), because the SDK client's codecs reject the
// V2 task shapes. ext-tasks has already framed `_meta` (protocolVersion, clientInfo,
// clientCapabilities); the dispatcher adds the JSON-RPC id, the routing headers of MCP
// 2026-07-28 "Transports" (MCP-Protocol-Version, Mcp-Method, Mcp-Name = tool name or taskId),
// the bearer, and reads the answer as JSON or as an SSE stream (comment lines are keep-alives).
//
// Plain ESM with no imports: the package works linked (`npm install ./clients/typescript`),
// copied or packed, and never brings a second copy of the SDK.

export const PROTOCOL_VERSION = "2026-07-28";
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

/** Client capabilities for a Tasks client: the extension, and elicitation (task input requests are elicitations). */
export const TASKS_CAPABILITIES = Object.freeze({
  elicitation: Object.freeze({ form: Object.freeze({}) }),
  extensions: Object.freeze({ [TASKS_EXTENSION]: Object.freeze({}) }),
});

/** An error the dispatcher itself raised: no JSON-RPC answer came back. Names the task for tasks/*. */
export class McpDispatchError extends Error {
  constructor(message, { method, taskId, status, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "McpDispatchError";
    this.method = method;
    this.taskId = taskId;
    this.status = status;
  }
}

/** The caller's wait timeout passed; the task goes on. Resume with `session.resumeTask(err.reference)` or `session.task(err.taskId)`. */
export class TaskWaitTimeoutError extends Error {
  constructor(taskId, timeoutMs, reference, lastTask) {
    super(
      `task ${taskId} was not terminal after ${timeoutMs} ms (last status: ${lastTask?.status ?? "unknown"}); ` +
        `it goes on: resume it by taskId`,
    );
    this.name = "TaskWaitTimeoutError";
    this.taskId = taskId;
    this.timeoutMs = timeoutMs;
    this.reference = reference;
    this.lastTask = lastTask;
  }
}

/** The routing-header value of a method (MCP 2026-07-28 "Request headers"; ext-tasks "HTTP headers"). */
export function mcpNameOf(method, params) {
  if (method === "tools/call" || method === "prompts/get") return params?.name;
  if (method === "resources/read") return params?.uri;
  if (typeof method === "string" && method.startsWith("tasks/")) return params?.taskId;
  return undefined;
}

/** A header value that is not plain visible ASCII travels base64-encoded (MCP 2026-07-28 "Request headers"). */
export function encodeHeaderValue(value) {
  const s = String(value);
  const plain = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(s) && !s.startsWith("=?base64?");
  return plain ? s : `=?base64?${Buffer.from(s, "utf8").toString("base64")}?=`;
}

/** The taskId an error concerns, following `cause` (ext-tasks wraps dispatcher errors in its DispatchError). */
export function taskIdOf(error) {
  for (let e = error, depth = 0; e && depth < 8; e = e.cause, depth++) {
    if (typeof e.taskId === "string") return e.taskId;
  }
  return undefined;
}

let seq = 0;

/**
 * A RawClientDispatch for `createTaskSessionFromClient`.
 *
 * - `url`: the MCP endpoint (a string or URL).
 * - `token`: sent as `Authorization: Bearer <token>`; or `headers` for any other fixed headers.
 * - `fetch`: the fetch to use (default: the global one).
 *
 * No time cap of its own: a request ends when its answer arrives, when the caller's `signal`
 * aborts, or after `context.requestTimeoutMs` when the caller set one. (Node's fetch still
 * drops a connection that is *silent* for 300 s; the sidecar sends SSE keep-alive comments
 * while it holds an answer.)
 */
export function createDispatch({ url, token, headers = {}, fetch: fetchImpl = globalThis.fetch } = {}) {
  if (!url) throw new TypeError("createDispatch: url is required");
  const endpoint = String(url);
  const fixed = { ...headers, ...(token !== undefined ? { Authorization: `Bearer ${token}` } : {}) };

  return async function rawDispatch(request, options = {}) {
    const { method, params = {} } = request;
    const id = request.id ?? `owt-${++seq}`;
    const taskId = typeof method === "string" && method.startsWith("tasks/") ? params?.taskId : undefined;
    const name = mcpNameOf(method, params);
    const { signal, dispose } = linkSignals(options.signal, options.context?.requestTimeoutMs);
    const fail = (message, extra = {}) => new McpDispatchError(`${method}${taskId ? ` (task ${taskId})` : ""}: ${message}`, { method, taskId, ...extra });
    let res;
    try {
      res = await fetchImpl(endpoint, {
        method: "POST",
        signal,
        body: JSON.stringify({ jsonrpc: "2.0", id, method, params }),
        headers: {
          "Content-Type": "application/json",
          Accept: "application/json, text/event-stream",
          "MCP-Protocol-Version": PROTOCOL_VERSION,
          "Mcp-Method": method,
          ...(name !== undefined ? { "Mcp-Name": encodeHeaderValue(name) } : {}),
          ...fixed,
          ...(options.context?.headers ?? {}),
        },
      });
    } catch (cause) {
      dispose();
      throw fail(`request failed: ${cause?.message ?? cause}`, { cause });
    }
    try {
      const contentType = res.headers.get("content-type") ?? "";
      let message;
      if (contentType.includes("text/event-stream")) {
        message = await readSseResponse(res, id);
        if (!message) throw fail(`HTTP ${res.status}: the event stream ended without the response`, { status: res.status });
      } else {
        const text = await res.text();
        try {
          message = text.trim() ? JSON.parse(text) : undefined;
        } catch {
          message = undefined;
        }
        if (!message || typeof message !== "object" || !("result" in message || "error" in message)) {
          throw fail(`HTTP ${res.status} without a JSON-RPC response: ${text.slice(0, 300)}`, { status: res.status });
        }
      }
      return message.error ? { kind: "error", error: message.error } : { kind: "result", result: message.result };
    } catch (cause) {
      if (cause instanceof McpDispatchError) throw cause;
      throw fail(`reading the answer failed: ${cause?.message ?? cause}`, { status: res.status, cause });
    } finally {
      dispose();
    }
  };
}

/**
 * Everything `createTaskSessionFromClient` needs besides the client and `onInputRequest`:
 * `{ endpointId, rawDispatch, v2RequestFraming }`. `capabilities` must be what the SDK client
 * was constructed with (default TASKS_CAPABILITIES).
 */
export function taskSessionOptions({ url, token, headers, fetch, clientInfo, capabilities = TASKS_CAPABILITIES, endpointId } = {}) {
  if (!clientInfo) throw new TypeError("taskSessionOptions: clientInfo ({ name, version }) is required");
  return {
    endpointId: endpointId ?? String(url),
    rawDispatch: createDispatch({ url, token, headers, fetch }),
    v2RequestFraming: { protocolVersion: PROTOCOL_VERSION, clientInfo, clientCapabilities: capabilities },
  };
}

/**
 * Settles an ext-tasks ToolExecution: `{ outcome, lastTask }` as `execution.settle()` gives.
 * `timeoutMs` is the caller's (none by default). When it passes, the execution is detached
 * (the remote task is NOT cancelled) and TaskWaitTimeoutError carries `taskId` and a
 * serialized `reference`: `session.resumeTask(err.reference)` gives a new execution to wait on.
 */
export async function waitForTask(execution, { timeoutMs, signal, onEvent } = {}) {
  if (timeoutMs === undefined) return execution.settle({ signal, onEvent });
  const controller = new AbortController();
  const timedOut = Symbol("timed out");
  const timer = setTimeout(() => controller.abort(timedOut), timeoutMs);
  const onAbort = () => controller.abort(signal.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  let lastTask;
  try {
    return await execution.settle({
      signal: controller.signal,
      onEvent: async (event) => {
        if (event.type === "task") lastTask = event.task;
        await onEvent?.(event);
      },
    });
  } catch (error) {
    if (controller.signal.reason === timedOut && execution.kind === "task") {
      await execution.detach();
      // ext-tasks 0.2.2 cancels, on session.close(), every execution whose local outcome has
      // not settled yet, detached or not: let the detached one settle locally first.
      if (typeof execution.result === "function") await execution.result().catch(() => {});
      throw new TaskWaitTimeoutError(execution.handle.taskId, timeoutMs, execution.serializeReference(), lastTask);
    }
    throw error;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

function linkSignals(signal, timeoutMs) {
  if (timeoutMs === undefined) return { signal, dispose: () => {} };
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException(`request timed out after ${timeoutMs} ms`, "TimeoutError")),
    timeoutMs,
  );
  const onAbort = () => controller.abort(signal.reason);
  if (signal?.aborted) controller.abort(signal.reason);
  else signal?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    },
  };
}

/**
 * Reads a text/event-stream body until the JSON-RPC response with `id` arrives (WHATWG HTML
 * "Server-sent events": `data:` lines joined by "\n", dispatched at a blank line; lines
 * starting with ":" are comments). Stops reading there; returns undefined if the stream ends
 * first.
 */
async function readSseResponse(res, id) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  const take = (line) => {
    if (line === "") {
      if (data.length === 0) return undefined;
      const payload = data.join("\n");
      data = [];
      try {
        const m = JSON.parse(payload);
        if (m && m.id === id && ("result" in m || "error" in m)) return m;
      } catch {
        // not JSON: not ours
      }
      return undefined;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    return undefined;
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buffer.search(/\r\n|\r|\n/)) !== -1) {
        // A "\r" that ends the chunk may be the first half of "\r\n": wait for the next one.
        if (!done && nl === buffer.length - 1 && buffer[nl] === "\r") break;
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer[nl] === "\r" && buffer[nl + 1] === "\n" ? 2 : 1));
        const found = take(line);
        if (found) return found;
      }
      if (done) {
        if (buffer) take(buffer);
        return take("");
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
