"""A tool whose host catalog publishes an outputSchema, called by the Python `mcp` SDK (2.3.0) at
its default options: `call_tool` validates a successful result's structuredContent against the
listed schema and raises on a mismatch (MCP 2026-07-28 Tools §Output Schema), so the call only
succeeds if the sidecar answers with the object the schema describes."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest

from support import connect, get_run

pytestmark = pytest.mark.anyio

TOOL = "structured-greeting"
META_RUN_ID = "io.openwop/runId"


async def test_call_tool_validates_structured_content_against_the_listed_output_schema() -> None:
    async with connect() as client:
        listed = await client.list_tools()
        tool = next(t for t in listed.tools if t.name == TOOL)
        assert tool.output_schema is not None, "the catalog's outputSchema is listed"
        assert tool.output_schema["additionalProperties"] is False

        # Spy on the SDK's own validation step: it must run (and pass) for this call.
        session = client.session
        validated: list[str] = []
        original = session.validate_tool_result

        async def spy(name: str, result: types.CallToolResult) -> None:
            await original(name, result)
            validated.append(name)

        session.validate_tool_result = spy  # type: ignore[method-assign]
        result = await client.call_tool(TOOL, {"name": "Ada"})

    assert validated == [TOOL], "the SDK validated the result against the outputSchema"
    assert result.is_error is False, result.model_dump(by_alias=True)
    assert result.structured_content == {"name": "Ada", "delayMs": 0, "text": "Hello, Ada!"}
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    assert texts[0] == "Hello, Ada!"
    assert json.loads(texts[-1]) == result.structured_content
    meta: dict[str, Any] = result.model_dump(by_alias=True).get("_meta") or {}
    run_id = meta.get(META_RUN_ID)
    assert isinstance(run_id, str), f"the result names its run in _meta: {meta}"
    assert (await get_run(run_id))["status"] == "completed"
