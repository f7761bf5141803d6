// Types for index.js. Structural on purpose: the package imports nothing, so these mirror the
// shapes of @modelcontextprotocol/ext-tasks's RawClientDispatch, V2RequestFraming and
// ToolExecution that it works with.

export declare const PROTOCOL_VERSION: "2026-07-28";
export declare const TASKS_EXTENSION: "io.modelcontextprotocol/tasks";
export declare const TASKS_CAPABILITIES: {
  readonly elicitation: { readonly form: {} };
  readonly extensions: { readonly "io.modelcontextprotocol/tasks": {} };
};

type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };

export interface DispatchOptions {
  readonly signal?: AbortSignal;
  readonly context?: {
    readonly headers?: Readonly<Record<string, string>>;
    readonly requestTimeoutMs?: number;
    readonly resetTimeoutOnProgress?: boolean;
  };
}

export type JsonRpcResponse =
  | { readonly kind: "result"; readonly result: Json }
  | { readonly kind: "error"; readonly error: { readonly code: number; readonly message: string; readonly data?: Json } };

/** Same shape as ext-tasks's RawClientDispatch. */
export type RawDispatch = (request: Json, options?: DispatchOptions) => Promise<JsonRpcResponse>;

export interface DispatchConfig {
  /** The MCP endpoint, e.g. http://127.0.0.1:8080/mcp. */
  readonly url: string | URL;
  /** Sent as `Authorization: Bearer <token>`. */
  readonly token?: string;
  /** Fixed extra headers on every request. */
  readonly headers?: Readonly<Record<string, string>>;
  readonly fetch?: typeof globalThis.fetch;
}

/** A rawDispatch for `createTaskSessionFromClient`; no time cap of its own. */
export declare function createDispatch(config: DispatchConfig): RawDispatch;

export interface TaskSessionOptions {
  readonly endpointId: string;
  readonly rawDispatch: RawDispatch;
  readonly v2RequestFraming: {
    readonly protocolVersion: string;
    readonly clientInfo: Readonly<Record<string, Json>>;
    readonly clientCapabilities: Readonly<Record<string, Json>>;
  };
}

/** `{ endpointId, rawDispatch, v2RequestFraming }` to spread into `createTaskSessionFromClient`'s options. */
export declare function taskSessionOptions(
  config: DispatchConfig & {
    readonly clientInfo: { readonly name: string; readonly version: string };
    /** The capabilities the SDK Client was constructed with (default TASKS_CAPABILITIES). */
    readonly capabilities?: Readonly<Record<string, Json>>;
    /** Default: the url. */
    readonly endpointId?: string;
  },
): TaskSessionOptions;

/** The dispatcher's own failure (no JSON-RPC answer): names the method, the task and the HTTP status. */
export declare class McpDispatchError extends Error {
  readonly method: string;
  readonly taskId?: string;
  readonly status?: number;
}

export interface SerializedTaskReference {
  readonly endpointId: string;
  readonly generation: "v1" | "v2";
  readonly taskId: string;
  readonly originalOperation: string;
}

/** The caller's wait timeout passed; the task goes on on the server. */
export declare class TaskWaitTimeoutError extends Error {
  readonly taskId: string;
  readonly timeoutMs: number;
  /** For `session.resumeTask(reference)`. */
  readonly reference: SerializedTaskReference;
  /** The last task snapshot seen, if any. */
  readonly lastTask?: { readonly status: string; readonly [key: string]: unknown };
}

/** Structural subset of ext-tasks's ToolExecution that waitForTask uses. */
export interface SettleableExecution<TSettlement> {
  readonly kind: "immediate" | "task";
  readonly handle?: { readonly taskId: string };
  settle(options?: { signal?: AbortSignal; onEvent?: (event: any) => void | Promise<void> }): Promise<TSettlement>;
  detach(): Promise<void>;
  serializeReference?(): SerializedTaskReference;
  result?(): Promise<unknown>;
}

/**
 * `execution.settle()` with a caller-chosen `timeoutMs` (none by default). On timeout the
 * execution is detached (the task is not cancelled) and TaskWaitTimeoutError carries the taskId
 * and a reference for `session.resumeTask`.
 */
export declare function waitForTask<TSettlement>(
  execution: SettleableExecution<TSettlement>,
  options?: { timeoutMs?: number; signal?: AbortSignal; onEvent?: (event: any) => void | Promise<void> },
): Promise<TSettlement>;

/** The routing-header value (`Mcp-Name`) of a method: tool name, resource uri, or taskId. */
export declare function mcpNameOf(method: string, params: unknown): string | undefined;
/** Plain visible ASCII as is, anything else as `=?base64?…?=`. */
export declare function encodeHeaderValue(value: string): string;
/** The taskId an error concerns, following `cause` (ext-tasks wraps dispatcher errors). */
export declare function taskIdOf(error: unknown): string | undefined;
