// OAuth 2.1 for MCP clients that connect with only the URL: aasd's
// metadata, the 401 that starts it, the official v2 client's OAuth
// support with the consent page driven in headless Chromium up to a
// create_sandbox, and every refusal (another audience, an expired token,
// a reused code, a wrong PKCE verifier, a revoked grant, a used refresh
// token) over plain HTTP. Client ID Metadata Documents are served here
// on loopback (AAS_OAUTH_LOCAL_DOCUMENTS=1, a test-only setting).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { startAasd, vmEnv, psql, post, initializeBody } from './lib/harness.mjs';
import { startSmtpSink } from './lib/smtp.mjs';
import { WebClient, randomEmail, GOOD_PASSWORD, linkIn, signUpAndLogIn } from './lib/web.mjs';
import { launchBrowser, closeBrowser, formFill, clickAndWait, checkA11y } from './lib/browser.mjs';

let aasd;
let smtp;
let docs; // a loopback server for client metadata documents and redirects
const docBodies = new Map();
const made = [];

before(async () => {
  smtp = await startSmtpSink();
  docs = http.createServer((req, res) => {
    const body = docBodies.get(req.url.split('?')[0]);
    if (body === undefined) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('redirected here');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(typeof body === 'string' ? body : JSON.stringify(body));
  });
  await new Promise((r) => docs.listen(0, '127.0.0.1', r));
  aasd = await startAasd(vmEnv('oauth', {
    AAS_SMTP_URL: smtp.url,
    AAS_MAIL_FROM: 'aas test <noreply@aas.test>',
    AAS_ARGON2_M_KIB: '8192',
    AAS_ARGON2_T_COST: '1',
    AAS_TRUST_X_REAL_IP: '1',
    AAS_OAUTH_LOCAL_DOCUMENTS: '1',
    // The v2 client registers from 127.0.0.1 in every run; the limit itself
    // is tested in tests/unit/test_service_oauth.c.
    AAS_OAUTH_REGISTRATIONS_PER_ADDRESS: '100000',
  }));
});
after(async () => {
  for (const { id, token } of made) {
    await fetch(`${aasd.url}/v1/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}`, 'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call', 'mcp-name': 'destroy_sandbox', 'mcp-param-sandbox-id': id },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call',
        params: { name: 'destroy_sandbox', arguments: { sandbox_id: id },
          _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': {},
            'io.modelcontextprotocol/clientInfo': { name: 'cleanup', version: '1' } } } }),
    }).catch(() => {});
  }
  await aasd?.stop();
  await smtp?.stop();
  docs?.close();
});

const docsUrl = () => `http://127.0.0.1:${docs.address().port}`;
const sha256 = (s) => crypto.createHash('sha256').update(s).digest('hex');
const b64url = (b) => b.toString('base64url');

function pkce() {
  const verifier = b64url(crypto.randomBytes(32));
  return { verifier, challenge: b64url(crypto.createHash('sha256').update(verifier).digest()) };
}

// A verified account logged in on a WebClient with an address of its own.
async function user() {
  const c = new WebClient(aasd.url);
  const addr = `198.51.100.${crypto.randomInt(1, 255)}-${crypto.randomBytes(3).toString('hex')}`;
  const { get, post: p } = c;
  c.get = (path, h = {}) => get.call(c, path, { 'x-real-ip': addr, ...h });
  c.post = (path, f, h = {}) => p.call(c, path, f, { 'x-real-ip': addr, ...h });
  const email = randomEmail('oauth');
  await signUpAndLogIn(c, email);
  const mail = await smtp.waitFor(email, { subject: 'Verify' });
  const link = linkIn(mail, '/verify?code=');
  assert.equal((await c.openLink(link)).status, 200);
  c.email = email;
  return c;
}

async function register(redirect = `${docsUrl()}/callback`, extra = {}) {
  // An address of its own: registrations are limited per client address.
  const addr = `203.0.113.${crypto.randomInt(1, 255)}-${crypto.randomBytes(3).toString('hex')}`;
  const r = await fetch(`${aasd.url}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-real-ip': addr },
    body: JSON.stringify({ client_name: 'e2e client', redirect_uris: [redirect],
      token_endpoint_auth_method: 'none', ...extra }),
  });
  return { status: r.status, json: await r.json() };
}

function authorizeQuery(clientId, challenge, extra = {}) {
  return new URLSearchParams({
    response_type: 'code', client_id: clientId, redirect_uri: `${docsUrl()}/callback`,
    code_challenge: challenge, code_challenge_method: 'S256', state: 'st-123', scope: 'mcp',
    resource: `${aasd.url}/v1/mcp`, ...extra,
  });
}

// Consents on the logged-in client's behalf; returns the redirect's URL.
async function consent(c, clientId, challenge, extra = {}) {
  const q = authorizeQuery(clientId, challenge, extra);
  const page = await c.get(`/oauth/authorize?${q}`);
  if (page.status === 400) {
    // A bad request is shown, with a link back, never followed by itself.
    assert.equal(page.headers.get('location'), null);
    const back = page.text.match(/<a href="([^"]+)" id="back">/);
    assert.ok(back, page.text);
    return new URL(back[1].replace(/&amp;/g, '&'));
  }
  assert.equal(page.status, 200, page.text);
  const csrf = page.text.match(/name="csrf" value="([0-9a-f]{64})"/)[1];
  const r = await c.post('/oauth/authorize', { ...Object.fromEntries(q), csrf, decision: 'approve' });
  assert.equal(r.status, 303, r.text);
  return new URL(r.headers.get('location'));
}

async function token(fields) {
  const r = await fetch(`${aasd.url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: r.status, json: await r.json(), headers: r.headers };
}

async function codeFor(c, clientId) {
  const { verifier, challenge } = pkce();
  const back = await consent(c, clientId, challenge);
  assert.equal(back.searchParams.get('state'), 'st-123');
  assert.equal(back.searchParams.get('iss'), aasd.url);
  return { code: back.searchParams.get('code'), verifier };
}

async function tokensFor(c, clientId) {
  const { code, verifier } = await codeFor(c, clientId);
  const r = await token({ grant_type: 'authorization_code', code, code_verifier: verifier,
    client_id: clientId, redirect_uri: `${docsUrl()}/callback`, resource: `${aasd.url}/v1/mcp` });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return r.json;
}

// A 2026-07-28 tools/call get_usage with the token.
async function usage(tok) {
  const body = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_usage', arguments: {},
    _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' } } } };
  return post(aasd.mcpUrl, body, { authorization: `Bearer ${tok}`, 'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call', 'mcp-name': 'get_usage' });
}

test('metadata: the protected resource (both URLs) and the authorization server', async () => {
  for (const p of ['/.well-known/oauth-protected-resource/v1/mcp', '/.well-known/oauth-protected-resource']) {
    const r = await fetch(aasd.url + p);
    assert.equal(r.status, 200);
    const m = await r.json();
    assert.equal(m.resource, `${aasd.url}/v1/mcp`);
    assert.deepEqual(m.authorization_servers, [aasd.url]);
    assert.deepEqual(m.bearer_methods_supported, ['header']);
  }
  const as = await (await fetch(`${aasd.url}/.well-known/oauth-authorization-server`)).json();
  assert.equal(as.issuer, aasd.url);
  assert.deepEqual(as.code_challenge_methods_supported, ['S256']);
  assert.deepEqual(as.response_types_supported, ['code']);
  assert.equal(as.client_id_metadata_document_supported, true);
  assert.equal(as.authorization_response_iss_parameter_supported, true);
  assert.equal(as.token_endpoint, `${aasd.url}/oauth/token`);
  assert.equal((await fetch(`${aasd.url}/.well-known/openid-configuration`)).status, 404);
});

test('a call that needs a credential and has none is 401 with resource_metadata, under both eras', async () => {
  const r = await post(aasd.mcpUrl, { jsonrpc: '2.0', id: 1, method: 'tools/call',
    params: { name: 'get_usage', arguments: {}, _meta: {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' } } } },
  { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'get_usage' });
  assert.equal(r.status, 401);
  assert.match(r.headers.get('www-authenticate'),
    new RegExp(`^Bearer resource_metadata="${aasd.url}/.well-known/oauth-protected-resource/v1/mcp"`));
  assert.match(r.json.error.message, /x-api-key/);
  // The older revision: initialize and tools/list stay open, a tool call is 401.
  const init = await post(aasd.mcpUrl, initializeBody());
  assert.equal(init.status, 200);
  const sid = init.headers.get('mcp-session-id');
  const h = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
  assert.equal((await post(aasd.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, h)).status, 200);
  const info = await post(aasd.mcpUrl, { jsonrpc: '2.0', id: 3, method: 'tools/call',
    params: { name: 'get_service_info', arguments: {} } }, h);
  assert.equal(info.status, 200);
  const call = await post(aasd.mcpUrl, { jsonrpc: '2.0', id: 4, method: 'tools/call',
    params: { name: 'list_sandboxes', arguments: {} } }, h);
  assert.equal(call.status, 401);
  assert.match(call.headers.get('www-authenticate'), /resource_metadata=/);
});

test('the v2 client authorizes through the consent page in Chromium and creates a sandbox', async () => {
  const c = await user();
  const callback = `${docsUrl()}/callback`;
  const store = {};
  let authUrl;
  const provider = {
    get redirectUrl() { return callback; },
    get clientMetadata() {
      return { client_name: 'aas e2e v2 client', redirect_uris: [callback],
        grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
        token_endpoint_auth_method: 'none' };
    },
    state() { return 'browser-state'; },
    clientInformation() { return store.client; },
    saveClientInformation(info) { store.client = info; },
    tokens() { return store.tokens; },
    saveTokens(t) { store.tokens = t; },
    redirectToAuthorization(url) { authUrl = url; },
    saveCodeVerifier(v) { store.verifier = v; },
    codeVerifier() { return store.verifier; },
    invalidateCredentials(scope) { if (scope === 'all' || scope === 'tokens') delete store.tokens; },
  };
  const url = new URL(aasd.mcpUrl);
  const first = new StreamableHTTPClientTransport(url, { authProvider: provider });
  const c1 = new Client({ name: 'aas-oauth-e2e', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  // server/discover needs no credential; the first tool call starts OAuth.
  await c1.connect(first);
  await assert.rejects(c1.callTool({ name: 'list_sandboxes', arguments: {} }),
    (e) => e instanceof UnauthorizedError);
  await c1.close().catch(() => {});
  assert.ok(store.client?.client_id?.startsWith('aas_client_'), 'registered dynamically');
  assert.equal(authUrl.searchParams.get('code_challenge_method'), 'S256');
  assert.equal(authUrl.searchParams.get('resource'), `${aasd.url}/v1/mcp`);

  const browser = await launchBrowser();
  let back;
  try {
    const page = await browser.newPage();
    await page.setExtraHTTPHeaders({ 'x-real-ip': '203.0.113.7' });
    await page.goto(authUrl.href, { waitUntil: 'load' });
    assert.match(page.url(), /\/login\?next=/);
    await formFill(page, { email: c.email, password: GOOD_PASSWORD });
    await clickAndWait(page, 'main button[type=submit]');
    assert.match(page.url(), /\/oauth\/authorize\?/);
    assert.match(await page.$eval('main', (m) => m.textContent), /aas e2e v2 client/);
    await checkA11y(page);
    await clickAndWait(page, '#approve');
    back = new URL(page.url());
  } finally {
    await closeBrowser(browser);
  }
  assert.equal(back.origin + back.pathname, callback);
  assert.equal(back.searchParams.get('state'), 'browser-state');
  assert.equal(back.searchParams.get('iss'), aasd.url);

  const second = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await second.finishAuth(back.searchParams);
  assert.match(store.tokens.access_token, /^aas_at_/);
  assert.match(store.tokens.refresh_token, /^aas_rt_/);
  const c2 = new Client({ name: 'aas-oauth-e2e', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await c2.connect(second);
  await c2.listTools(); // the client learns which arguments travel as headers
  const r = await c2.callTool({ name: 'create_sandbox', arguments: { timeout_minutes: 10 } });
  assert.ok(!r.isError, JSON.stringify(r.content));
  const id = r.structuredContent.sandbox_id;
  made.push({ id, token: store.tokens.access_token });
  const run = await c2.callTool({ name: 'run_command', arguments: { sandbox_id: id, command: 'echo via-oauth' } });
  assert.match(run.structuredContent.stdout, /via-oauth/);

  // An expired access token: the client refreshes (rotating) and goes on.
  const oldRefresh = store.tokens.refresh_token;
  await psql(`UPDATE oauth_tokens SET expires_at = now() - interval '1 second'
    WHERE token_hash = '${sha256(store.tokens.access_token)}'`);
  const list = await c2.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.ok(list.structuredContent.sandboxes.some((s) => s.sandbox_id === id));
  assert.notEqual(store.tokens.refresh_token, oldRefresh, 'the refresh token rotated');
  made[made.length - 1].token = store.tokens.access_token;
  await c2.close();

  // The dashboard lists the application.
  const apps = await c.get('/dashboard/apps');
  assert.match(apps.text, /aas e2e v2 client/);
});

test('refusals: wrong PKCE verifier, reused code, another audience, expiry, revoked grant, used refresh token', async () => {
  const c = await user();
  const reg = await register();
  assert.equal(reg.status, 201, JSON.stringify(reg.json));
  const clientId = reg.json.client_id;
  assert.deepEqual(reg.json.redirect_uris, [`${docsUrl()}/callback`]);
  const redirect = `${docsUrl()}/callback`;

  // A wrong verifier is refused and spends the code.
  const a = await codeFor(c, clientId);
  let r = await token({ grant_type: 'authorization_code', code: a.code, code_verifier: pkce().verifier,
    client_id: clientId, redirect_uri: redirect });
  assert.equal(r.status, 400);
  assert.equal(r.json.error, 'invalid_grant');
  assert.match(r.json.error_description, /code_verifier/);
  r = await token({ grant_type: 'authorization_code', code: a.code, code_verifier: a.verifier,
    client_id: clientId, redirect_uri: redirect });
  assert.equal(r.json.error, 'invalid_grant');

  // A code used twice: refused, and what it gave is revoked.
  const b = await codeFor(c, clientId);
  const fields = { grant_type: 'authorization_code', code: b.code, code_verifier: b.verifier,
    client_id: clientId, redirect_uri: redirect };
  const good = await token(fields);
  assert.equal(good.status, 200);
  assert.equal(good.headers.get('cache-control'), 'no-store');
  assert.equal((await usage(good.json.access_token)).status, 200);
  r = await token(fields);
  assert.equal(r.json.error, 'invalid_grant');
  assert.match(r.json.error_description, /used before/);
  const afterReuse = await usage(good.json.access_token);
  assert.equal(afterReuse.status, 401);
  assert.match(afterReuse.headers.get('www-authenticate'), /error="invalid_token"/);

  // A token whose audience is another resource.
  const t1 = await tokensFor(c, clientId);
  assert.equal((await usage(t1.access_token)).status, 200);
  await psql(`UPDATE oauth_tokens SET resource = 'https://other.example/v1/mcp'
    WHERE token_hash = '${sha256(t1.access_token)}'`);
  r = await usage(t1.access_token);
  assert.equal(r.status, 401);
  assert.match(r.json.error.message, /another resource/);
  // ... and asking for one at the authorization endpoint.
  const other = await consent(c, clientId, pkce().challenge, { resource: 'https://other.example/v1/mcp' });
  assert.equal(other.searchParams.get('error'), 'invalid_target');
  // A token is for /v1/mcp only: the REST API refuses it.
  const t2 = await tokensFor(c, clientId);
  const rest = await fetch(`${aasd.url}/v1/sandboxes`, { headers: { authorization: `Bearer ${t2.access_token}` } });
  assert.equal(rest.status, 401);
  assert.doesNotMatch(rest.headers.get('www-authenticate'), /resource_metadata/,
    'no OAuth challenge where tokens are not accepted');

  // An expired token.
  await psql(`UPDATE oauth_tokens SET expires_at = now() - interval '1 second'
    WHERE token_hash = '${sha256(t2.access_token)}'`);
  r = await usage(t2.access_token);
  assert.equal(r.status, 401);
  assert.match(r.json.error.message, /expired/);

  // Refresh rotates; the used refresh token shown again revokes the grant.
  r = await token({ grant_type: 'refresh_token', refresh_token: t2.refresh_token, client_id: clientId });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  const t3 = r.json;
  assert.notEqual(t3.refresh_token, t2.refresh_token);
  assert.equal((await usage(t3.access_token)).status, 200);
  r = await token({ grant_type: 'refresh_token', refresh_token: t2.refresh_token, client_id: clientId });
  assert.equal(r.json.error, 'invalid_grant');
  assert.equal((await usage(t3.access_token)).status, 401);

  // A grant revoked in Connected apps ends its tokens and refresh.
  const t4 = await tokensFor(c, clientId);
  const apps = await c.get('/dashboard/apps');
  const grant = apps.text.match(/action="\/dashboard\/apps\/([0-9a-f-]{36})\/revoke"/)[1];
  const csrf = apps.text.match(/name="csrf" value="([0-9a-f]{64})"/)[1];
  assert.equal((await c.post(`/dashboard/apps/${grant}/revoke`, { csrf })).status, 303);
  assert.equal((await usage(t4.access_token)).status, 401);
  r = await token({ grant_type: 'refresh_token', refresh_token: t4.refresh_token, client_id: clientId });
  assert.equal(r.json.error, 'invalid_grant');
  assert.match((await c.get('/dashboard/apps')).text, /No application is connected/);

  // A token never goes in a URL.
  const t5 = await tokensFor(c, clientId);
  const q = await post(`${aasd.mcpUrl}?access_token=${t5.access_token}`, initializeBody());
  assert.equal(q.status, 400);
  assert.ok(!aasd.log().includes(t5.access_token));
});

test('authorization requests with a bad client or redirect are shown, not redirected', async () => {
  const c = await user();
  const { challenge } = pkce();
  let r = await c.get(`/oauth/authorize?${authorizeQuery('aas_client_' + '0'.repeat(32), challenge)}`);
  assert.equal(r.status, 400);
  assert.match(r.text, /Unknown application/);
  const reg = await register();
  r = await c.get(`/oauth/authorize?${authorizeQuery(reg.json.client_id, challenge,
    { redirect_uri: 'https://evil.example/cb' })}`);
  assert.equal(r.status, 400);
  assert.match(r.text, /not registered/);
  // No PKCE: back to the client with an error.
  const back = await consent(c, reg.json.client_id, challenge, { code_challenge_method: 'plain' });
  assert.equal(back.searchParams.get('error'), 'invalid_request');
  // Registration refuses what it cannot use.
  for (const bad of [{ redirect_uris: ['http://evil.example/cb'] }, { redirect_uris: [] },
    { redirect_uris: ['javascript:alert(1)'] }, { grant_types: ['client_credentials'] }]) {
    const x = await register(undefined, bad);
    assert.equal(x.status, 400, JSON.stringify(bad));
    assert.match(x.json.error, /invalid_(client_metadata|redirect_uri)/);
  }
  // An account whose address is not verified connects nothing (and
  // makes the service fetch nothing).
  const fresh = new WebClient(aasd.url);
  const freshAddr = `192.0.2.${crypto.randomInt(1, 255)}-${crypto.randomBytes(3).toString('hex')}`;
  const fget = fresh.get;
  const fpost = fresh.post;
  fresh.get = (p, h = {}) => fget.call(fresh, p, { 'x-real-ip': freshAddr, ...h });
  fresh.post = (p, f, h = {}) => fpost.call(fresh, p, f, { 'x-real-ip': freshAddr, ...h });
  await signUpAndLogIn(fresh, randomEmail('unverified'));
  const unverified = await fresh.get(`/oauth/authorize?${authorizeQuery(reg.json.client_id, challenge)}`);
  assert.equal(unverified.status, 403);
  assert.match(unverified.text, /Verify your address first/);
  // Deny goes back with access_denied.
  const q = authorizeQuery(reg.json.client_id, challenge);
  const page = await c.get(`/oauth/authorize?${q}`);
  const csrf = page.text.match(/name="csrf" value="([0-9a-f]{64})"/)[1];
  const d = await c.post('/oauth/authorize', { ...Object.fromEntries(q), csrf, decision: 'deny' });
  assert.equal(new URL(d.headers.get('location')).searchParams.get('error'), 'access_denied');
});

test('a Client ID Metadata Document names the client; a document for another id is refused', async () => {
  const c = await user();
  const id = `${docsUrl()}/clients/e2e.json`;
  docBodies.set('/clients/e2e.json', { client_id: id, client_name: 'Document client',
    redirect_uris: [`${docsUrl()}/callback`], token_endpoint_auth_method: 'none' });
  const { verifier, challenge } = pkce();
  const page = await c.get(`/oauth/authorize?${authorizeQuery(id, challenge)}`);
  assert.equal(page.status, 200, page.text);
  assert.match(page.text, /Document client/);
  const back = await consent(c, id, challenge);
  const r = await token({ grant_type: 'authorization_code', code: back.searchParams.get('code'),
    code_verifier: verifier, client_id: id, redirect_uri: `${docsUrl()}/callback` });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.equal((await usage(r.json.access_token)).status, 200);

  const liar = `${docsUrl()}/clients/liar.json`;
  docBodies.set('/clients/liar.json', { client_id: id, client_name: 'Liar',
    redirect_uris: [`${docsUrl()}/callback`] });
  const bad = await c.get(`/oauth/authorize?${authorizeQuery(liar, challenge)}`);
  assert.equal(bad.status, 400);
  assert.match(bad.text, /client_id is not the URL/);
  docBodies.set('/clients/huge.json', 'x'.repeat(6000));
  const huge = await c.get(`/oauth/authorize?${authorizeQuery(`${docsUrl()}/clients/huge.json`, challenge)}`);
  assert.equal(huge.status, 400);
  assert.match(huge.text, /larger than/);
});
