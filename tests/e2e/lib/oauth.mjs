// A headless OAuth client provider for the SDKs' `authProvider` option (the same interface in
// @modelcontextprotocol/client 2.x and @modelcontextprotocol/sdk 1.x): its "browser" is a fetch
// that logs in as a demo user at the demo authorization server.

import assert from "node:assert/strict";

export const REDIRECT_URL = "http://127.0.0.1:9/oauth/callback";

/**
 * An in-memory OAuthClientProvider whose "browser" is a fetch: it opens the authorization URL the
 * SDK built, as the demo user `user` (the demo authorization server's `login_hint`, in place of a
 * click on its consent page), and keeps the callback URL the server redirects to.
 */
export class HeadlessProvider {
  constructor(user) {
    this.user = user;
    this.callback = undefined;
    this.seenAuthorizationUrl = undefined;
    this._client = undefined;
    this._tokens = undefined;
    this._verifier = undefined;
  }
  get redirectUrl() {
    return REDIRECT_URL;
  }
  get clientMetadata() {
    return {
      client_name: "openwop-mcp-sidecar-e2e",
      redirect_uris: [REDIRECT_URL],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this._client;
  }
  saveClientInformation(info) {
    this._client = info;
  }
  tokens() {
    return this._tokens;
  }
  saveTokens(tokens) {
    this._tokens = tokens;
  }
  saveCodeVerifier(v) {
    this._verifier = v;
  }
  codeVerifier() {
    return this._verifier;
  }
  // Kept next to the code verifier so the SDK can bind the callback to the authorization server
  // it discovered (SEP-2352).
  saveDiscoveryState(state) {
    this._discovery = state;
  }
  discoveryState() {
    return this._discovery;
  }
  async redirectToAuthorization(url) {
    this.seenAuthorizationUrl = new URL(url);
    const u = new URL(url);
    u.searchParams.set("login_hint", this.user);
    const res = await fetch(u, { redirect: "manual" });
    assert.equal(res.status, 302, `the authorization endpoint redirects back: HTTP ${res.status} ${await res.text()}`);
    this.callback = new URL(res.headers.get("location"));
  }
}
