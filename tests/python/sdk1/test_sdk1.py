"""The Python `mcp` SDK 1.x (1.30.0, the latest 1.x line, which most Python MCP clients are
built on) against the mount at its default options: it opens with `initialize`, and the mount
serves the initialize-era revision it negotiates on the same endpoint as 2026-07-28 clients."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import mcp.types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

MCP_URL = os.environ["MCP_URL"]
REST_URL = os.environ["REST_URL"].rstrip("/")
KEY = "acme-dev-key"


@asynccontextmanager
async def session(elicit: Any = None):
    """A ClientSession as docs/clients.md sets one up: the bearer on an httpx client whose read
    timeout outlasts a held answer (httpx's own default is 5 s of silence)."""
    http = httpx.AsyncClient(
        headers={"Authorization": f"Bearer {KEY}"}, timeout=httpx.Timeout(30.0, read=300.0)
    )
    async with http, streamable_http_client(MCP_URL, http_client=http) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=elicit) as s:
            yield s


async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"action": "accept"})


def run_status(run_id: str) -> str:
    req = urllib.request.Request(
        f"{REST_URL}/runs/{quote(run_id, safe='')}",
        headers={"Authorization": f"Bearer {KEY}", "OpenWOP-Version": "2.0", "Accept": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)["status"]


async def test_sdk1_initializes_with_2025_11_25_and_lists_tools_with_task_support() -> None:
    async with session() as s:
        init = await s.initialize()
        assert init.protocolVersion == "2025-11-25"
        assert init.serverInfo.name == "openwop-mcp-sidecar"
        assert init.capabilities.tools is not None
        assert init.capabilities.tasks is not None, "2025-11-25 Tasks are offered"
        assert await s.send_ping() is not None
        tools = (await s.list_tools()).tools
        names = {t.name for t in tools}
        assert {"conformance-approval", "conformance-noop", "confirm_delete"} <= names
        assert all(t.execution is not None and t.execution.taskSupport in ("optional", "required", "forbidden") for t in tools)


async def test_sdk1_blocking_call_is_answered_through_its_elicitation_callback() -> None:
    async with session(elicit=approve) as s:
        await s.initialize()
        result = await s.call_tool("confirm_delete", {"filename": "py1.txt"})
        assert result.isError is False, result
        assert result.content[0].text == "Deleted py1.txt."


async def test_sdk1_task_with_an_approval_completes() -> None:
    async with session(elicit=approve) as s:
        await s.initialize()
        created = await s.experimental.call_tool_as_task("conformance-approval", {})
        task_id = created.task.taskId
        assert created.task.status in ("working", "input_required")
        # The SDK's poll stops at input_required; the app asks for the result, whose stream
        # delivers the elicitation (answered by the callback) and then the tool's result.
        async for status in s.experimental.poll_task(task_id):
            if status.status in ("input_required", "completed"):
                break
        final = await s.experimental.get_task_result(task_id, types.CallToolResult)
        assert final.isError is False, final
        got = await s.experimental.get_task(task_id)
        assert got.status == "completed"


async def test_sdk1_task_cancel_cancels_the_run() -> None:
    async with session() as s:
        await s.initialize()
        created = await s.experimental.call_tool_as_task("conformance-cancellable", {"delayMs": 20000})
        task_id = created.task.taskId
        cancelled = await s.experimental.cancel_task(task_id)
        assert cancelled.status == "cancelled"
        run_id = task_id.replace("~2F", "/")
        deadline = time.monotonic() + 10
        while run_status(run_id) != "cancelled":
            assert time.monotonic() < deadline, "the run was not cancelled"
            await anyio.sleep(0.1)
