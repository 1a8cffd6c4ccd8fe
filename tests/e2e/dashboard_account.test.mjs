// What a stolen dashboard cookie or a greedy client can do through the
// account's own forms, over plain HTTP: current-password checks are
// limited as logins are (and leave others' logins alone), a reset ends
// sessions, OAuth grants and (unless unchecked) API keys, a change ends the
// other sessions and the grants, and e-mail links act only on the POST of
// their page's button. No VM is needed here.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { startAasd, psql, post, initializeBody, JSON_HEADERS } from './lib/harness.mjs';
import { startSmtpSink } from './lib/smtp.mjs';
import { WebClient, randomEmail, GOOD_PASSWORD, linkIn, signUpAndLogIn } from './lib/web.mjs';

let aasd;
let smtp;
const REDIRECT = 'http://127.0.0.1:9/callback'; // never followed here

before(async () => {
  smtp = await startSmtpSink();
  aasd = await startAasd({
    AAS_SMTP_URL: smtp.url,
    AAS_MAIL_FROM: 'aas test <noreply@aas.test>',
    // Hashes slow enough that a loop of them would fill both turns.
    AAS_ARGON2_M_KIB: '32768',
    AAS_ARGON2_T_COST: '2',
    AAS_PASSWORD_HASHES: '2',
    AAS_LOGIN_FAILURES: '5',
    AAS_TRUST_X_REAL_IP: '1',
  });
});
after(async () => {
  await aasd?.stop();
  await smtp?.stop();
});

// A client with an address of its own (aasd trusts X-Real-IP from loopback).
function client(addr = `198.51.100.${crypto.randomInt(1, 255)}-${crypto.randomBytes(3).toString('hex')}`) {
  const c = new WebClient(aasd.url);
  const { get, post: p } = c;
  c.get = (path, h = {}) => get.call(c, path, { 'x-real-ip': addr, ...h });
  c.post = (path, f, h = {}) => p.call(c, path, f, { 'x-real-ip': addr, ...h });
  c.addr = addr;
  return c;
}

// A sign-up, then a login on c (a sign-up alone logs nobody in).
async function signUp(c, email = randomEmail('acct')) {
  await signUpAndLogIn(c, email);
  c.email = email;
  return email;
}

// A verified account, logged in on c.
async function verified(c) {
  const email = await signUp(c);
  const link = linkIn(await smtp.waitFor(email, { subject: 'Verify' }), '/verify?code=');
  assert.equal((await c.openLink(link)).status, 200);
  return email;
}

async function logIn(email) {
  const c = client();
  const r = await c.submit('/login', '/login', { email, password: GOOD_PASSWORD });
  assert.equal(r.status, 303, r.text);
  return c;
}

async function newKey(c) {
  const r = await c.submit('/dashboard/keys', '/dashboard/keys', { name: 'k' });
  assert.equal(r.status, 201, r.text);
  return r.text.match(/id="new-key">(aas_sk_[A-Za-z0-9_-]+)</)[1];
}

const keyWorks = async (key) =>
  (await post(aasd.mcpUrl, initializeBody(), { ...JSON_HEADERS, 'x-api-key': key })).status;

const b64url = (b) => b.toString('base64url');

async function token(fields) {
  const r = await fetch(`${aasd.url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: r.status, json: await r.json() };
}

// An OAuth grant of c's account: a registered client, the consent, the code
// redeemed; answers the client id and the tokens.
async function grant(c) {
  const reg = await fetch(`${aasd.url}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-real-ip': c.addr },
    body: JSON.stringify({ client_name: 'e2e client', redirect_uris: [REDIRECT],
      token_endpoint_auth_method: 'none' }),
  });
  assert.equal(reg.status, 201);
  const clientId = (await reg.json()).client_id;
  const verifier = b64url(crypto.randomBytes(32));
  const q = new URLSearchParams({
    response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, state: 's',
    code_challenge: b64url(crypto.createHash('sha256').update(verifier).digest()),
    code_challenge_method: 'S256', scope: 'mcp', resource: `${aasd.url}/v1/mcp`,
  });
  const page = await c.get(`/oauth/authorize?${q}`);
  assert.equal(page.status, 200, page.text);
  const csrf = page.text.match(/name="csrf" value="([0-9a-f]{64})"/)[1];
  const r = await c.post('/oauth/authorize', { ...Object.fromEntries(q), csrf, decision: 'approve' });
  assert.equal(r.status, 303, r.text);
  const code = new URL(r.headers.get('location')).searchParams.get('code');
  const t = await token({ grant_type: 'authorization_code', code, code_verifier: verifier,
    client_id: clientId, redirect_uri: REDIRECT, resource: `${aasd.url}/v1/mcp` });
  assert.equal(t.status, 200, JSON.stringify(t.json));
  return { clientId, ...t.json };
}

// A tools/call with the access token (2026-07-28: no session).
async function accessWorks(tok) {
  const body = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_usage', arguments: {},
    _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' } } } };
  return (await post(aasd.mcpUrl, body, { authorization: `Bearer ${tok}`,
    'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'get_usage' })).status;
}

const refreshWorks = async (g) => (await token({ grant_type: 'refresh_token',
  refresh_token: g.refresh_token, client_id: g.clientId })).status;

test('wrong current passwords are limited per account; the right one is refused until the window passes; others log in meanwhile', async () => {
  const thief = client();
  const email = await signUp(thief);
  const other = client();
  const otherEmail = await signUp(other);
  const csrf = await thief.csrf('/dashboard/settings');
  const guess = (current) => thief.post('/dashboard/settings',
    { csrf, current, password: 'a wholly new passphrase' });
  // Eight guesses at once, twice, while the other account logs in.
  const statuses = [];
  const logins = [];
  for (let round = 0; round < 2; round++) {
    const burst = Array.from({ length: 8 }, (_, i) => guess(`wrong guess ${round}-${i}`));
    logins.push(client().submit('/login', '/login', { email: otherEmail, password: GOOD_PASSWORD }));
    for (const r of await Promise.all(burst)) statuses.push(r);
  }
  for (const l of await Promise.all(logins)) {
    assert.equal(l.status, 303, `the other account logs in: ${l.status} ${l.text.slice(0, 300)}`);
  }
  const wrong = statuses.filter((r) => r.status === 400);
  const limited = statuses.filter((r) => r.status === 429);
  assert.ok(wrong.length <= 5, `at most AAS_LOGIN_FAILURES guesses are checked, not ${wrong.length}`);
  assert.ok(limited.length >= 11, `the rest are refused: ${statuses.map((r) => r.status)}`);
  for (const r of wrong) assert.match(r.text, /current password is not right/);
  assert.match(limited[0].text, /Too many/);
  // A guess that finds every password-hashing slot busy is refused unchecked
  // (429, "Too many password checks at this moment") and its count taken
  // back after its gate has counted it, so a lock seen inside a burst may
  // not outlive the burst: guess on, one at a time, until a guess made
  // with nothing else in flight finds the checks locked.
  let locked = false;
  for (let i = 0; !locked && i < 6; i++) {
    const g = await guess(`one more wrong guess ${i}`);
    assert.ok(g.status === 400 || g.status === 429, `a guess: ${g.status}`);
    locked = g.status === 429 && /Too many wrong passwords/.test(g.text);
  }
  assert.ok(locked, 'the checks lock after AAS_LOGIN_FAILURES wrong passwords');
  // The right password learns nothing now, and changes nothing.
  const right = await guess(GOOD_PASSWORD);
  assert.equal(right.status, 429);
  assert.match(right.text, /try again in \d+ minutes?/);
  // The password did not change, and the owner, elsewhere, still logs in:
  // the guesses lock the stolen session's checks, not the owner's logins.
  const r = await client().submit('/login', '/login', { email, password: 'a wholly new passphrase' });
  assert.equal(r.status, 401, 'the password did not change');
  const owner = await client().submit('/login', '/login', { email, password: GOOD_PASSWORD });
  assert.equal(owner.status, 303, `the owner logs in from another address: ${owner.status}`);
  // Past the window (moved back here), the right password works again.
  await psql(`UPDATE auth_events SET at = at - interval '1 hour' WHERE subject = 'login:${email}'`);
  const again = await thief.submit('/dashboard/settings', '/dashboard/settings',
    { current: GOOD_PASSWORD, password: 'a wholly new passphrase' });
  assert.equal(again.status, 303, again.text);
});

async function resetLink(email) {
  const c = client();
  assert.equal((await c.submit('/reset', '/reset', { email })).status, 200);
  return { c, link: linkIn(await smtp.waitFor(email, { subject: 'Reset' }), '/reset/confirm?code=') };
}

test('a reset ends every session, every OAuth grant and, by default, every API key', async () => {
  const c = client();
  const email = await verified(c);
  const key = await newKey(c);
  const g = await grant(c);
  assert.equal(await keyWorks(key), 200);
  assert.equal(await accessWorks(g.access_token), 200);

  const { c: r, link } = await resetLink(email);
  const page = await r.get(link.pathname + link.search);
  assert.equal(page.status, 200);
  const csrf = page.text.match(/name="csrf" value="([0-9a-f]{64})"/)[1];
  const done = await r.post('/reset/confirm', { csrf, code: link.searchParams.get('code'),
    password: 'a brand new passphrase', revoke_keys: '1' });
  assert.equal(done.status, 303, done.text);
  assert.equal((await c.get('/dashboard')).headers.get('location'), '/login', 'the old cookie is refused');
  assert.equal(await accessWorks(g.access_token), 401, 'the access token is refused');
  assert.equal(await refreshWorks(g), 400, 'the refresh token is refused');
  assert.equal(await keyWorks(key), 401, 'the key is refused, in this aasd, at once');
  assert.equal((await r.get('/dashboard')).status, 200, 'the resetting browser is logged in');
  // The form offers it, checked.
  assert.match(page.text, /name="revoke_keys" value="1" id="f-revoke-keys" checked/);
  assert.match(page.text, /Your API keys will be revoked; uncheck to keep them/);
});

test('a reset with the box unchecked keeps the API keys', async () => {
  const c = client();
  const email = await verified(c);
  const key = await newKey(c);
  const { c: r, link } = await resetLink(email);
  const done = await r.submit(link.pathname + link.search, '/reset/confirm',
    { code: link.searchParams.get('code'), password: 'a brand new passphrase' });
  assert.equal(done.status, 303, done.text);
  assert.equal((await c.get('/dashboard')).status, 303);
  assert.equal(await keyWorks(key), 200);
});

test('a password change ends the other sessions and the OAuth grants; this session and the keys go on', async () => {
  const c = client();
  const email = await verified(c);
  const key = await newKey(c);
  const g = await grant(c);
  const elsewhere = await logIn(email);
  const r = await c.submit('/dashboard/settings', '/dashboard/settings',
    { current: GOOD_PASSWORD, password: 'a brand new passphrase' });
  assert.equal(r.status, 303, r.text);
  const settings = await c.get('/dashboard/settings?changed=1');
  assert.equal(settings.status, 200, 'this browser is still logged in');
  assert.equal((await elsewhere.get('/dashboard')).headers.get('location'), '/login');
  assert.equal(await accessWorks(g.access_token), 401);
  assert.equal(await refreshWorks(g), 400);
  assert.equal(await keyWorks(key), 200);
  assert.match(settings.text, /Other sessions and connected apps are logged out/);
});

test('a GET of a verification or address-change link changes nothing; the button on its page does', async () => {
  const c = client();
  const email = await signUp(c);
  const link = linkIn(await smtp.waitFor(email, { subject: 'Verify' }), '/verify?code=');
  const verifiedAt = () => psql(`SELECT count(*) FROM accounts WHERE email = '${email}' AND email_verified_at IS NOT NULL`);
  // A mail scanner: no cookies, a GET or two.
  const pages = [];
  for (let i = 0; i < 2; i++) {
    const r = await fetch(aasd.url + link.pathname + link.search);
    assert.equal(r.status, 200);
    pages.push(await r.text());
  }
  assert.equal(await verifiedAt(), '0');
  for (const p of pages) assert.match(p, /<button type="submit">Verify my address<\/button>/);
  // A POST without the page's token is refused; with it, verified.
  let r = await client().post('/verify', { code: link.searchParams.get('code') });
  assert.equal(r.status, 403);
  assert.equal(await verifiedAt(), '0');
  r = await client().openLink(link);
  assert.equal(r.status, 200);
  assert.match(r.text, /verified/);
  assert.equal(await verifiedAt(), '1');

  const fresh = randomEmail('moved');
  r = await c.submit('/dashboard/settings', '/dashboard/settings/email', { email: fresh, current: GOOD_PASSWORD });
  assert.equal(r.status, 200, r.text);
  const move = linkIn(await smtp.waitFor(fresh, { subject: 'Confirm your new' }), '/email/confirm?code=');
  r = await fetch(aasd.url + move.pathname + move.search);
  assert.equal(r.status, 200);
  assert.equal(await psql(`SELECT count(*) FROM accounts WHERE email = '${email}'`), '1', 'unchanged by a GET');
  r = await c.openLink(move);
  assert.equal(r.status, 200, r.text);
  assert.equal(await psql(`SELECT count(*) FROM accounts WHERE email = '${fresh}'`), '1');
});
