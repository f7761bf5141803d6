"""The Python `mcp` SDK (2.3.0) as a plain 2026-07-28 client: discovery, tool listing, blocking
calls, tool errors and protocol errors, over stateless streamable HTTP."""

from __future__ import annotations

import json

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from support import FIXTURES, PROTOCOL_VERSION, WireLog, connect, get_run, run_id_of
from openwop_mcp_tasks import TASKS_EXTENSION as TASKS_EXT

pytestmark = pytest.mark.anyio


async def test_sdk_connects_through_server_discover_without_initialize_or_sessions() -> None:
    wire = WireLog()
    async with connect(wire=wire) as client:
        assert client.protocol_version == PROTOCOL_VERSION
        discovered = client.session.discover_result
        assert discovered is not None, "the SDK adopted a DiscoverResult"
        assert PROTOCOL_VERSION in discovered.supported_versions
        assert client.server_capabilities.tools is not None
        # ext-tasks only turns on 2026-07-28 tasks when the value is exactly {} (MCP 2026-07-28 server/discover).
        assert client.server_capabilities.extensions == {TASKS_EXT: {}}
        assert client.server_info is not None and client.server_info.name == "openwop-mcp-sidecar"
        await client.list_tools()

    assert wire.sent, "nothing was sent"
    assert wire.sent[0].body["method"] == "server/discover", "the first request is server/discover"
    assert not wire.posts("initialize"), "a 2026-07-28 client never sends initialize"
    for s in wire.sent:
        # Stateless HTTP: POST only (no GET stream, no DELETE), no session id, the version headers.
        assert s.method == "POST", f"{s.method} {s.body}"
        assert "mcp-session-id" not in s.headers
        assert s.headers["mcp-protocol-version"] == PROTOCOL_VERSION
        assert s.headers["mcp-method"] == s.body["method"]
        assert s.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == PROTOCOL_VERSION


async def test_tools_list_offers_every_fixture_workflow_as_a_tool_with_an_object_schema() -> None:
    async with connect() as client:
        listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    missing = [f for f in FIXTURES if f not in names]
    assert not missing, f"tools/list lacks {missing}: {names}"
    assert names == sorted(names), "tools/list is in a deterministic (sorted) order"
    for tool in listed.tools:
        assert tool.input_schema.get("type") == "object", f"{tool.name}: {tool.input_schema}"
    # tools/list is cacheable in 2026-07-28: the result carries the cache hints.
    assert listed.ttl_ms is not None and listed.ttl_ms >= 0
    assert listed.cache_scope in ("public", "private")


async def test_blocking_call_returns_text_content_backed_by_a_completed_run() -> None:
    async with connect() as client:
        result = await client.call_tool("conformance-noop", {})
    assert result.is_error is False, result.model_dump(by_alias=True)
    texts = [b for b in result.content if isinstance(b, types.TextContent)]
    assert texts, f"a text block: {result.content}"
    # The text block mirrors structuredContent (tools spec SHOULD).
    assert json.loads(texts[0].text) == result.structured_content
    run_id = run_id_of(result)
    assert result.structured_content["status"] == "completed"
    assert (await get_run(run_id))["status"] == "completed"


async def test_failing_workflow_is_an_is_error_result_not_a_protocol_error() -> None:
    async with connect() as client:
        result = await client.call_tool("conformance-failure", {})
    assert result.is_error is True, result.model_dump(by_alias=True)
    assert any(isinstance(b, types.TextContent) and b.text for b in result.content), "the failure is explained"
    assert (await get_run(run_id_of(result)))["status"] == "failed"


async def test_unknown_tool_is_a_32602_protocol_error() -> None:
    async with connect() as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("no-such-workflow", {})
    assert caught.value.error.code == -32602, caught.value
