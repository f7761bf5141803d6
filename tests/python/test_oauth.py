"""The Python SDK's OAuth helper (`mcp.client.auth.OAuthClientProvider`, default options) against
`demo`, whose devhost is also a demo authorization server: from the mount's 401 to a completed
tool call and a task, headless, with no token handed in by the test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from support import CLIENT_INFO, MCP_URL, get_run, run_id_of, unproject
from openwop_mcp_tasks.mcp_sdk import CreateTaskResult, TasksExtension, settle

pytestmark = pytest.mark.anyio

REDIRECT_URI = "http://127.0.0.1:9/oauth/callback"


class MemoryStorage:
    """TokenStorage kept in memory for one test."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@asynccontextmanager
async def logged_in(user: str, **client_kwargs: Any) -> AsyncIterator[tuple[Client, dict[str, Any]]]:
    """A `mcp.client.Client` whose HTTP client carries the SDK's OAuth helper. Its "browser" is an
    HTTP GET of the authorization URL the SDK built, as the demo user `user` (the demo
    authorization server's `login_hint`, in place of a click on its consent page)."""
    seen: dict[str, Any] = {"storage": MemoryStorage()}

    async def redirect_handler(url: str) -> None:
        seen["authorization_url"] = url
        sep = "&" if "?" in url else "?"
        async with httpx2.AsyncClient(follow_redirects=False) as browser:
            resp = await browser.get(url + sep + urlencode({"login_hint": user}))
        assert resp.status_code == 302, resp.text
        seen["callback"] = resp.headers["location"]

    async def callback_handler() -> AuthorizationCodeResult:
        q = parse_qs(urlparse(seen["callback"]).query)
        assert "error" not in q, seen["callback"]
        return AuthorizationCodeResult(
            code=q["code"][0], state=q.get("state", [None])[0], iss=q.get("iss", [None])[0]
        )

    provider = OAuthClientProvider(
        server_url=MCP_URL,
        client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT_URI], client_name="openwop-python-suite"),
        storage=seen["storage"],
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    http = httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30.0, read=60.0))
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(http)
        client = await stack.enter_async_context(
            Client(streamable_http_client(MCP_URL, http_client=http), client_info=CLIENT_INFO, **client_kwargs)
        )
        yield client, seen


async def test_the_sdk_logs_in_by_itself_and_its_tool_call_runs_as_the_approving_user() -> None:
    async with logged_in("alice") as (client, seen):
        result = await client.call_tool("conformance-noop", {})
    assert isinstance(result, types.CallToolResult)
    assert result.is_error is False, result.model_dump(by_alias=True)
    auth = parse_qs(urlparse(seen["authorization_url"]).query)
    assert auth["code_challenge_method"] == ["S256"]
    assert auth["resource"] == [MCP_URL], "the token is asked for this MCP server (RFC 8707)"
    assert seen["storage"].tokens.access_token.startswith("owat_")
    run = await get_run(run_id_of(result))
    assert run["status"] == "completed"
    assert run["owner"]["subject"]["subjectId"] == "urn:devhost:acme:alice"
    assert run["owner"]["subject"]["lane"] == "oauth"


async def test_the_logged_in_sdk_runs_a_task_to_completion() -> None:
    async def accept(_ctx: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"action": "accept"})

    async with logged_in("bob", elicitation_callback=accept, extensions=[TasksExtension()]) as (client, _):
        created = await client.session.call_tool("conformance-approval", {}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        final = await settle(client.session, created)
    assert final["status"] == "completed", final
    run = await get_run(unproject(created.task_id), key="globex-dev-key")
    assert run["status"] == "completed"
    assert run["owner"]["tenant"] == "globex"
