"""Helpers for the Python client suite: SDK clients against the running demo, a wire
log of what the SDK sent, and REST helpers against the host (through the sidecar's passthrough).

tests/python/run.sh starts `openwop-mcp-sidecar demo` and exports MCP_URL and REST_URL.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
import mcp_types as types
from mcp.client import Client, ClientExtension
from mcp.client.streamable_http import streamable_http_client

PROTOCOL_VERSION = "2026-07-28"
CLIENT_INFO = types.Implementation(name="openwop-mcp-sidecar-python-suite", version="0.0.0")
KEYS = {"acme": "acme-dev-key", "globex": "globex-dev-key", "acme_approver": "acme-approver-key"}
TERMINAL = ("completed", "failed", "cancelled")

# The fixture workflows the demo host serves as MCP tools (devhost/src/fixtures).
FIXTURES = (
    "conformance-approval",
    "conformance-approval-approvers",
    "conformance-cancellable",
    "conformance-clarification",
    "conformance-delay",
    "conformance-failure",
    "conformance-noop",
)


def _required_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run the suite through tests/python/run.sh")
    return value


MCP_URL = _required_env("MCP_URL")
REST_URL = _required_env("REST_URL").rstrip("/")


# ------------------------------------------------------------------------------------------------
# SDK clients


@dataclass
class Sent:
    """One HTTP request the SDK sent to the MCP endpoint."""

    method: str
    headers: dict[str, str]
    body: dict[str, Any] | None


@dataclass
class WireLog:
    sent: list[Sent] = field(default_factory=list)

    def posts(self, mcp_method: str) -> list[Sent]:
        return [s for s in self.sent if s.body is not None and s.body.get("method") == mcp_method]


@asynccontextmanager
async def connect(
    *,
    key: str = KEYS["acme"],
    elicitation_callback: Callable[..., Awaitable[Any]] | None = None,
    extensions: Sequence[ClientExtension] | None = None,
    wire: WireLog | None = None,
) -> AsyncIterator[Client]:
    """A `mcp.client.Client` in its default `mode="auto"` (server/discover first) on its own
    HTTP client, authenticated with the demo bearer `key`. With `wire`, records every request."""

    async def record(request: httpx2.Request) -> None:
        if wire is None:
            return
        body = None
        if request.content:
            try:
                body = json.loads(request.content)
            except ValueError:
                body = None
        wire.sent.append(Sent(request.method, {k.lower(): v for k, v in request.headers.items()}, body))

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx2.Timeout(30.0, read=60.0),
        event_hooks={"request": [record]},
    )
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(http)
        kwargs: dict[str, Any] = {"client_info": CLIENT_INFO}
        if elicitation_callback is not None:
            kwargs["elicitation_callback"] = elicitation_callback
        if extensions is not None:
            kwargs["extensions"] = extensions
        client = await stack.enter_async_context(
            Client(streamable_http_client(MCP_URL, http_client=http), **kwargs)
        )
        yield client


# ------------------------------------------------------------------------------------------------
# Ids


def unproject(run_or_task_id: str) -> str:
    """`acme~2Fr-xyz` → `acme/r-xyz` (the task id is the projected run id, RFC 0184)."""
    return re.sub(r"~([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), run_or_task_id)


def run_id_of(result: types.CallToolResult) -> str:
    """The run a blocking tools/call result names (structuredContent, mirrored in a text block)."""
    structured = result.structured_content
    if isinstance(structured, dict) and isinstance(structured.get("runId"), str):
        return structured["runId"]
    for block in result.content:
        if isinstance(block, types.TextContent):
            try:
                value = json.loads(block.text)
            except ValueError:
                continue
            if isinstance(value, dict) and isinstance(value.get("runId"), str):
                return value["runId"]
    raise AssertionError(f"the result names no run: {result.model_dump(by_alias=True)}")


# ------------------------------------------------------------------------------------------------
# REST (the OpenWOP run API, through the sidecar's passthrough)


async def rest(path: str, *, key: str = KEYS["acme"], method: str = "GET", body: Any = None) -> httpx2.Response:
    headers = {"Accept": "application/json", "OpenWOP-Version": "2.0", "Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(timeout=10.0) as http:
        return await http.request(method, f"{REST_URL}{path}", headers=headers, json=body)


def run_path(run_id: str) -> str:
    return quote(unproject(run_id), safe="")


async def get_run(run_id: str, *, key: str = KEYS["acme"]) -> dict[str, Any]:
    r = await rest(f"/runs/{run_path(run_id)}", key=key)
    assert r.status_code == 200, f"GET /runs/{run_path(run_id)} → {r.status_code} {r.text}"
    return r.json()


async def events(run_id: str, *, key: str = KEYS["acme"]) -> list[dict[str, Any]]:
    r = await rest(f"/runs/{run_path(run_id)}/events/poll?timeout=1", key=key)
    assert r.status_code == 200, f"events/poll {run_id} → {r.status_code} {r.text}"
    return r.json()["events"]


async def list_runs(workflow_id: str, *, key: str = KEYS["acme"]) -> list[str]:
    r = await rest(f"/runs?workflowId={quote(workflow_id)}&limit=100", key=key)
    assert r.status_code == 200, f"GET /runs?workflowId={workflow_id} → {r.status_code} {r.text}"
    return [run["runId"] for run in r.json()["runs"]]


async def fresh_run(workflow_id: str, before: Sequence[str], *, timeout_s: float = 5.0) -> str:
    """Polls GET /runs until a run of `workflow_id` not in `before` appears."""
    known = set(before)
    with anyio.fail_after(timeout_s):
        while True:
            new = [r for r in await list_runs(workflow_id) if r not in known]
            if new:
                return new[0]
            await anyio.sleep(0.1)


async def wait_run_status(run_id: str, statuses: Sequence[str] = TERMINAL, *, timeout_s: float = 10.0) -> dict:
    """Polls GET /runs/{id} until its status is one of `statuses`; fails naming the last one seen."""
    last = None
    try:
        with anyio.fail_after(timeout_s):
            while True:
                run = await get_run(run_id)
                last = run.get("status")
                if last in statuses:
                    return run
                await anyio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"run {run_id} did not reach {'|'.join(statuses)} in {timeout_s}s; last {last}")


async def cancel_run_quietly(run_id: str) -> None:
    """Cleanup only: cancels a run over REST, ignoring any answer."""
    try:
        await rest(f"/runs/{run_path(run_id)}/cancel", method="POST", body={})
    except Exception:  # noqa: BLE001 - best effort
        pass
