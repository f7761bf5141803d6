"""A blocking tool call that outlives the sidecar's JSON window, made by the Python `mcp` SDK
through the HTTP client a user writes first: a plain `httpx2.AsyncClient(headers=...)` to carry
the bearer, at httpx2's DEFAULT timeout, which is 5 s between bytes. No read timeout on the
session or the call, no progress callback.

The SDK sends `Accept: application/json, text/event-stream`. The sidecar answers JSON for quick
runs and, once its JSON window (2 s by default) has passed, switches to SSE: the head and a
first keep-alive comment at once, another comment every 3 s. So the client never waits 5 s for
a byte and a 70 s run (longer than the TypeScript SDK's 60 s request timeout: nothing on the
sidecar's side bounds it) comes back as its result in one call. With a JSON window as long as the
client's read timeout (the former 5 s) the response head came at 5.00x s, a race with the
client's timer that a loaded machine loses: the client gave up mid-call and the run was
cancelled. So the test also times the head, through the client's public event hooks. The one
70 s test of this suite (pytest runs in one process)."""

from __future__ import annotations

import time

import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from support import CLIENT_INFO, KEYS, MCP_URL, get_run, run_id_of

pytestmark = pytest.mark.anyio


@pytest.mark.timeout(150)
async def test_a_70_s_run_completes_as_one_blocking_call_through_a_default_5_s_httpx_client() -> None:
    sent: list[float] = []
    heads: list[tuple[float, str]] = []

    async def on_request(request: httpx2.Request) -> None:
        if request.headers.get("mcp-method") == "tools/call":
            sent.append(time.monotonic())

    async def on_response(response: httpx2.Response) -> None:
        if response.request.headers.get("mcp-method") == "tools/call":
            heads.append((time.monotonic() - sent[-1], response.headers.get("content-type", "")))

    hooks = {"request": [on_request], "response": [on_response]}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS['acme']}"}, event_hooks=hooks) as http:
        # What makes this the trap: httpx2's default read timeout is 5 s.
        assert http.timeout.read == 5.0, http.timeout
        async with Client(streamable_http_client(MCP_URL, http_client=http), client_info=CLIENT_INFO) as client:
            started = time.monotonic()
            result = await client.call_tool("slow_compute", {"seconds": 70, "label": "py-default"})
            took = time.monotonic() - started
    assert result.is_error is False, result.model_dump(by_alias=True)
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    assert first.text == "slow_compute py-default finished after 70 s"
    assert took >= 70, f"the answer is the run's result, after {took:.1f} s"
    # The switch to SSE comes well inside the client's read timeout, not at its edge.
    assert len(heads) == 1 and heads[0][1].startswith("text/event-stream"), heads
    assert heads[0][0] < 4.0, f"the SSE head after {heads[0][0]:.2f} s"
    assert (await get_run(run_id_of(result)))["status"] == "completed"
