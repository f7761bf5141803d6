"""Run a tool as an MCP task to completion with the official Python SDK (`mcp`, pinned in
tests/python/requirements.txt), answering the approval it asks for on the way.

    MCP_URL=http://127.0.0.1:8080/mcp MCP_KEY=acme-dev-key python examples/task.py

`mcp` 2.3.0 has no Tasks client of its own; tests/python/tasks_ext.py is a small one built on
the SDK's client-extension API (copy it beside your code). tests/python/test_examples.py runs
this file against the demo, so the README's snippet cannot drift from what works.
"""

import asyncio
import os
import sys

import httpx2
import mcp_types as types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
from tasks_ext import CreateTaskResult, TasksExtension, settle  # noqa: E402


async def approve(_ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
    print("asked:", params.message)
    return types.ElicitResult(action="accept", content={"action": "accept"})


async def main() -> None:
    url = os.environ.get("MCP_URL", "http://127.0.0.1:8080/mcp")
    key = os.environ.get("MCP_KEY", "acme-dev-key")
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
        async with Client(
            streamable_http_client(url, http_client=http),
            elicitation_callback=approve,
            extensions=[TasksExtension()],
        ) as client:
            # allow_claimed=True: get the CreateTaskResult itself instead of waiting inside
            # call_tool, to show the task id (it is the host's run id).
            created = await client.session.call_tool("conformance-approval", {}, allow_claimed=True)
            assert isinstance(created, CreateTaskResult), created
            print("task:", created.task_id, created.status)
            task = await settle(client.session, created)
            print("final:", task["status"], task["result"]["structuredContent"]["status"])


if __name__ == "__main__":
    asyncio.run(main())
