"""A blocking tool call that outlives the sidecar's JSON window, made by the Python `mcp` SDK at
its DEFAULT options: the SDK's own HTTP client (`create_mcp_http_client`: 30 s, read 300 s, with
only the demo's bearer added), no read timeout on the session or the call, no progress callback.
The SDK sends `Accept: application/json, text/event-stream`; the sidecar answers JSON for quick
runs and switches to SSE (keep-alives) for slow ones, so a 45 s run comes back as its result in
one call. The one 45 s test of this suite (pytest runs in one process)."""

from __future__ import annotations

import time

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from support import CLIENT_INFO, KEYS, MCP_URL, get_run, run_id_of

pytestmark = pytest.mark.anyio


@pytest.mark.timeout(120)
async def test_a_45_s_run_completes_as_one_blocking_call_with_the_sdk_defaults() -> None:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {KEYS['acme']}"}) as http:
        async with Client(streamable_http_client(MCP_URL, http_client=http), client_info=CLIENT_INFO) as client:
            started = time.monotonic()
            result = await client.call_tool("slow_compute", {"seconds": 45, "label": "py-default"})
            took = time.monotonic() - started
    assert result.is_error is False, result.model_dump(by_alias=True)
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    assert first.text == "slow_compute py-default finished after 45 s"
    assert took >= 45, f"the answer is the run's result, after {took:.1f} s"
    assert (await get_run(run_id_of(result)))["status"] == "completed"
