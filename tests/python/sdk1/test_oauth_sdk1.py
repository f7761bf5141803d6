"""The Python SDK 1.x's OAuth helper (`mcp.client.auth.OAuthClientProvider`, default options)
against `demo`, whose devhost is also a demo authorization server: from the 401 on `initialize`
to a completed tool call, headless, with no token handed in by the test."""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlparse

import httpx
import pytest
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

pytestmark = pytest.mark.anyio

MCP_URL = os.environ["MCP_URL"]
REST_URL = os.environ["REST_URL"].rstrip("/")
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


async def test_sdk1_logs_in_by_itself_and_its_call_runs_as_the_approving_user() -> None:
    seen: dict[str, Any] = {}
    storage = MemoryStorage()

    async def redirect_handler(url: str) -> None:
        # The "browser": the authorization URL the SDK built, as demo user alice.
        seen["authorization_url"] = url
        sep = "&" if "?" in url else "?"
        async with httpx.AsyncClient(follow_redirects=False) as browser:
            resp = await browser.get(url + sep + urlencode({"login_hint": "alice"}))
        assert resp.status_code == 302, resp.text
        seen["callback"] = resp.headers["location"]

    async def callback_handler() -> tuple[str, str | None]:
        q = parse_qs(urlparse(seen["callback"]).query)
        assert "error" not in q, seen["callback"]
        return q["code"][0], q.get("state", [None])[0]

    provider = OAuthClientProvider(
        server_url=MCP_URL,
        client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT_URI], client_name="openwop-sdk1-suite"),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    http = httpx.AsyncClient(auth=provider, timeout=httpx.Timeout(30.0, read=300.0))
    async with http, streamable_http_client(MCP_URL, http_client=http) as (read, write, _):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            assert init.protocolVersion == "2025-11-25"
            result = await s.call_tool("conformance-noop", {})
            assert result.isError is False, result
    assert "authorization_url" in seen, "the 401 on initialize sent the SDK to log in"
    params = parse_qs(urlparse(seen["authorization_url"]).query)
    assert params["resource"] == [MCP_URL], "the token is asked for this MCP server (RFC 8707)"
    assert storage.tokens is not None and storage.tokens.access_token.startswith("owat_")
    run_id = json.loads(result.content[-1].text)["runId"]
    req = urllib.request.Request(
        f"{REST_URL}/runs/{quote(run_id, safe='')}",
        headers={"Authorization": f"Bearer {storage.tokens.access_token}", "OpenWOP-Version": "2.0", "Accept": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        run = json.load(r)
    assert run["status"] == "completed"
    assert run["owner"]["subject"]["subjectId"] == "urn:devhost:acme:alice"
    assert run["owner"]["subject"]["lane"] == "oauth"
