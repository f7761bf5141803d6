"""A Tasks client for MCP 2026-07-28 over Streamable HTTP, on httpx2 alone.

Each request is one stateless POST (MCP 2026-07-28 "Transports"): the JSON-RPC body with the
per-request ``_meta`` (protocolVersion, clientInfo, clientCapabilities declaring the Tasks
extension), and the routing headers ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name``
(the tool name for ``tools/call``, the ``taskId`` for ``tasks/*``: ext-tasks "HTTP headers").
The answer is JSON or an SSE stream that ends with the response; SSE comment lines are the
server's keep-alives and are skipped.
"""

from __future__ import annotations

import base64
import inspect
import itertools
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

import anyio
import httpx2

from ._errors import McpError, TaskCancelled, TaskFailed, TaskInputRequired, TasksError, TaskWaitTimeout, TransportError

PROTOCOL_VERSION = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})

#: The HTTP timeouts a client gets unless it passes its own ``http`` client or ``timeout``.
#: None of them bounds a whole call or a task: ``read`` is the longest *silence* tolerated
#: between two bytes of one answer. The sidecar keeps a held answer alive with SSE comments
#: every few seconds, so 300 s (the MCP Python SDK's own SSE read timeout) only trips on a dead
#: connection. httpx2's bare default (5 s for everything) would abandon a blocking answer the
#: server is still computing.
DEFAULT_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)

#: The poll interval used when the server suggests none (ext-tasks clients use 1 s).
DEFAULT_POLL_INTERVAL_S = 1.0

InputResponse = dict[str, Any]
#: Answers one input request: ``(key, {"method": "elicitation/create", "params": {...}})`` →
#: the response (for an elicitation, ``{"action": "accept", "content": {...}}``). May be async.
OnInput = Callable[[str, dict[str, Any]], Union[InputResponse, Awaitable[InputResponse]]]


@dataclass(frozen=True)
class TaskStart:
    """What a ``tools/call`` declaring the Tasks extension returned: a task
    (``task_id`` and the ``CreateTaskResult`` in ``created``), or, when the server answered at
    once, the ``CallToolResult`` in ``result`` and ``task_id`` None (ext-tasks "Capability
    negotiation": the server chooses per call; a declaring client accepts either)."""

    task_id: str | None
    created: dict[str, Any] | None
    result: dict[str, Any] | None


def _header_value(value: str) -> str:
    """MCP 2026-07-28 "Request headers": a value that is not plain visible ASCII (or has edge
    whitespace, or looks like the sentinel itself) travels as ``=?base64?…?=``."""
    plain = value.isascii() and value.isprintable() and value == value.strip() and not value.startswith("=?base64?")
    if plain:
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _mcp_name(method: str, params: Mapping[str, Any]) -> str | None:
    if method in ("tools/call", "prompts/get"):
        name = params.get("name")
    elif method == "resources/read":
        name = params.get("uri")
    elif method.startswith("tasks/"):
        name = params.get("taskId")
    else:
        name = None
    return None if name is None else str(name)


async def _answer(on_input: OnInput, key: str, request: dict[str, Any]) -> InputResponse:
    answer = on_input(key, request)
    if inspect.isawaitable(answer):
        answer = await answer
    if not isinstance(answer, Mapping):
        raise TypeError(f"on_input must return a mapping (the response to {key!r}), got {type(answer).__name__}")
    response = dict(answer)
    # Responses inside inputResponses carry no resultType (MCP 2026-07-28 "Multi round-trip").
    response.pop("resultType", None)
    return response


class TasksClient:
    """An MCP 2026-07-28 client for tasks (``io.modelcontextprotocol/tasks``).

    ``url`` is the MCP endpoint (the sidecar's mount, e.g. ``http://127.0.0.1:8080/mcp``);
    ``token`` is sent as ``Authorization: Bearer``. Pass ``http`` to use your own
    ``httpx2.AsyncClient`` (auth flows, proxies, TLS); it is then yours to close. Otherwise the
    client makes one with ``timeout`` (default ``DEFAULT_HTTP_TIMEOUT``) and closes it in
    ``aclose()`` / ``async with``.

    The client keeps no session: a task started here can be read, answered, cancelled or waited
    for from any other client with the same credentials, by its id alone.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        http: httpx2.AsyncClient | None = None,
        timeout: httpx2.Timeout | None = None,
        client_info: Mapping[str, Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = url
        self._headers = dict(headers or {})
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._own_http = http is None
        self._http = http if http is not None else httpx2.AsyncClient(timeout=timeout or DEFAULT_HTTP_TIMEOUT)
        self.client_info = dict(client_info or {"name": "openwop-mcp-tasks", "version": "0.1.0"})
        if capabilities is None:
            # Task input requests are elicitations (answered with tasks/update), so a Tasks
            # client declares elicitation as well.
            capabilities = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
        self.capabilities = dict(capabilities)
        self._ids = itertools.count(1)

    async def __aenter__(self) -> TasksClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    # --------------------------------------------------------------------------------------
    # One request

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Sends one JSON-RPC request and returns its ``result``; a JSON-RPC error raises
        ``McpError``, no answer at all ``TransportError`` (both name the task for tasks/*)."""
        body_params = dict(params or {})
        meta = dict(body_params.get("_meta") or {})
        meta.setdefault("io.modelcontextprotocol/protocolVersion", PROTOCOL_VERSION)
        meta.setdefault("io.modelcontextprotocol/clientInfo", self.client_info)
        meta.setdefault("io.modelcontextprotocol/clientCapabilities", self.capabilities)
        body_params["_meta"] = meta
        request_id = f"owt-{next(self._ids)}"
        task_id = body_params.get("taskId") if method.startswith("tasks/") else None
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": method,
            **self._headers,
        }
        name = _mcp_name(method, body_params)
        if name is not None:
            headers["Mcp-Name"] = _header_value(name)
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params})
        try:
            async with self._http.stream("POST", self.url, content=body, headers=headers) as response:
                message = await self._read_response(response, request_id, method, task_id)
        except httpx2.HTTPError as err:
            raise TransportError(method, f"{type(err).__name__}: {err}", task_id=task_id) from err
        if "error" in message:
            error = message["error"] or {}
            raise McpError(
                method,
                int(error.get("code", 0)),
                str(error.get("message", "")),
                error.get("data"),
                http_status=response.status_code,
                task_id=task_id,
            )
        result = message.get("result")
        if not isinstance(result, dict):
            raise TransportError(method, f"the response's result is not an object: {result!r}", task_id=task_id)
        return result

    async def _read_response(
        self, response: httpx2.Response, request_id: str, method: str, task_id: str | None
    ) -> dict[str, Any]:
        content_type = response.headers.get("content-type", "")
        if content_type.startswith("text/event-stream"):
            async for message in _sse_messages(response):
                if isinstance(message, dict) and message.get("id") == request_id and ("result" in message or "error" in message):
                    return message
            raise TransportError(
                method, f"HTTP {response.status_code}: the event stream ended without the response", http_status=response.status_code, task_id=task_id
            )
        raw = await response.aread()
        try:
            message = json.loads(raw) if raw.strip() else None
        except ValueError:
            message = None
        if isinstance(message, dict) and ("result" in message or "error" in message):
            return message
        text = raw.decode("utf-8", "replace")[:300]
        raise TransportError(method, f"HTTP {response.status_code} without a JSON-RPC response: {text!r}", http_status=response.status_code, task_id=task_id)

    # --------------------------------------------------------------------------------------
    # Discovery and tools

    async def discover(self) -> dict[str, Any]:
        """``server/discover``: versions, capabilities (``extensions`` lists Tasks)."""
        return await self.request("server/discover")

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            result = await self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(result.get("tools") or [])
            cursor = result.get("nextCursor")
            if not cursor:
                return tools

    async def start_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, on_input: OnInput | None = None
    ) -> TaskStart:
        """``tools/call`` as a task. Returns at once with the task (or the result, when the server
        answered without one). Input the server asks for *before* it creates the task
        (``resultType: "input_required"``, MCP 2026-07-28 "Multi round-trip") goes through
        ``on_input`` and a retry carrying ``inputResponses`` and the echoed ``requestState``."""
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        while True:
            result = await self.request("tools/call", params)
            kind = result.get("resultType", "complete")
            if kind == "task":
                return TaskStart(task_id=result["taskId"], created=result, result=None)
            if kind != "input_required":
                return TaskStart(task_id=None, created=None, result=result)
            requests = result.get("inputRequests") or {}
            if on_input is None:
                raise TasksError(f"tools/call {name}: the server asks for input {sorted(requests)} before it creates the task; pass on_input")
            responses = {key: await _answer(on_input, key, req) for key, req in requests.items()}
            params = {"name": name, "arguments": dict(arguments or {}), "inputResponses": responses}
            if "requestState" in result:
                params["requestState"] = result["requestState"]

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        on_input: OnInput | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Starts the tool as a task and waits for its ``CallToolResult`` (see ``result``). A
        ``timeout`` that passes raises ``TaskWaitTimeout`` naming the task, which goes on."""
        started = await self.start_tool(name, arguments, on_input=on_input)
        if started.task_id is None:
            assert started.result is not None
            return started.result
        return await self.result(started.task_id, on_input=on_input, timeout=timeout)

    # --------------------------------------------------------------------------------------
    # The three task methods (ext-tasks "tasks/get", "tasks/update", "tasks/cancel")

    async def get(self, task_id: str) -> dict[str, Any]:
        """``tasks/get``: the task's status; ``inputRequests`` when ``input_required``, ``result``
        when ``completed``, ``error`` when ``failed``."""
        return await self.request("tasks/get", {"taskId": task_id})

    async def update(self, task_id: str, input_responses: Mapping[str, Any]) -> dict[str, Any]:
        """``tasks/update``: answers input requests by key (an ack; the status follows later)."""
        return await self.request("tasks/update", {"taskId": task_id, "inputResponses": dict(input_responses)})

    async def cancel(self, task_id: str) -> dict[str, Any]:
        """``tasks/cancel``: asks the server to cancel (an ack; the task may still end otherwise)."""
        return await self.request("tasks/cancel", {"taskId": task_id})

    # --------------------------------------------------------------------------------------
    # Waiting

    async def wait(
        self,
        task_id: str,
        *,
        on_input: OnInput | None = None,
        timeout: float | None = None,
        poll_interval: float | None = None,
    ) -> dict[str, Any]:
        """Polls ``tasks/get`` until the task is terminal and returns that snapshot.

        ``timeout`` (seconds) is the caller's: None, the default, waits as long as the task
        runs. When it passes, ``TaskWaitTimeout`` names the task, which goes on on the server;
        ``wait(err.task_id)`` resumes. Input requests are answered through ``on_input`` and
        ``tasks/update`` (each key once); without ``on_input`` they raise
        ``TaskInputRequired``. Polls at the task's ``pollIntervalMs`` unless ``poll_interval``
        (seconds) is given.
        """
        last: dict[str, Any] | None = None
        try:
            if timeout is None:
                return await self._poll(task_id, on_input, poll_interval, lambda t: None)
            with anyio.fail_after(timeout):

                def seen(task: dict[str, Any]) -> None:
                    nonlocal last
                    last = task

                return await self._poll(task_id, on_input, poll_interval, seen)
        except TimeoutError as err:
            if isinstance(err, TaskWaitTimeout) or timeout is None:
                raise
            raise TaskWaitTimeout(task_id, timeout, last) from None

    async def _poll(
        self,
        task_id: str,
        on_input: OnInput | None,
        poll_interval: float | None,
        seen: Callable[[dict[str, Any]], None],
    ) -> dict[str, Any]:
        answered: set[str] = set()
        while True:
            task = await self.get(task_id)
            seen(task)
            status = task.get("status")
            if status in TERMINAL:
                return task
            if status == "input_required":
                # ext-tasks "tasks/update": the snapshot lists every outstanding request until
                # its answer lands, so a key already answered is not answered twice.
                pending = {k: v for k, v in (task.get("inputRequests") or {}).items() if k not in answered}
                if pending:
                    if on_input is None:
                        raise TaskInputRequired(task)
                    responses = {key: await _answer(on_input, key, req) for key, req in pending.items()}
                    await self.update(task_id, responses)
                    answered.update(responses)
                    continue
            if poll_interval is not None:
                delay = poll_interval
            else:
                hint = task.get("pollIntervalMs")
                delay = hint / 1000 if isinstance(hint, (int, float)) and hint > 0 else DEFAULT_POLL_INTERVAL_S
            await anyio.sleep(delay)

    async def result(
        self,
        task_id: str,
        *,
        on_input: OnInput | None = None,
        timeout: float | None = None,
        poll_interval: float | None = None,
    ) -> dict[str, Any]:
        """``wait``, then the task's ``CallToolResult`` (a tool error is a result with
        ``isError: true``); a ``failed`` task raises ``TaskFailed``, a ``cancelled`` one
        ``TaskCancelled``, both naming the task."""
        task = await self.wait(task_id, on_input=on_input, timeout=timeout, poll_interval=poll_interval)
        if task["status"] == "completed":
            return dict(task.get("result") or {})
        if task["status"] == "failed":
            raise TaskFailed(task)
        raise TaskCancelled(task)


async def _sse_messages(response: httpx2.Response):  # type: ignore[no-untyped-def]
    """The JSON messages of a text/event-stream body (WHATWG HTML "Server-sent events":
    ``data:`` lines joined by newlines, dispatched at a blank line; ``:`` lines are comments)."""
    data: list[str] = []
    async for line in response.aiter_lines():
        line = line.rstrip("\r")
        if line == "":
            if data:
                payload = "\n".join(data)
                data = []
                try:
                    yield json.loads(payload)
                except ValueError:
                    continue
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        try:
            yield json.loads("\n".join(data))
        except ValueError:
            pass
