// The dashboard's forms with bad input, over plain HTTP: sign-up errors,
// CSRF, the login lockout, single-use and expired links, password reset,
// keys made and revoked there, and buying credit through a stand-in for
// Stripe with locally signed webhook deliveries. No VM is needed here;
// tests/e2e/dashboard.test.mjs drives the main flow in a browser.
// make test: alone (it compares answer times of known and unknown emails).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { startAasd, psql, post, initializeBody, JSON_HEADERS } from './lib/harness.mjs';
import { startSmtpSink } from './lib/smtp.mjs';
import {
  WebClient, randomEmail, GOOD_PASSWORD, linkIn, stripeSign, startFakeStripe, signUpAndLogIn,
} from './lib/web.mjs';

const WEBHOOK_SECRET = `whsec_${crypto.randomBytes(12).toString('hex')}`;
let aasd;
let smtp;
let stripe;

before(async () => {
  smtp = await startSmtpSink();
  stripe = await startFakeStripe();
  aasd = await startAasd({
    AAS_SMTP_URL: smtp.url,
    AAS_MAIL_FROM: 'aas test <noreply@aas.test>',
    AAS_ARGON2_M_KIB: '8192',
    AAS_ARGON2_T_COST: '1',
    AAS_LOGIN_FAILURES: '3',
    AAS_TRUST_X_REAL_IP: '1',
    AAS_STRIPE_SECRET_KEY: 'sk_test_aas',
    AAS_STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    AAS_STRIPE_API_URL: stripe.url,
    AAS_TOPUP_USD: '5,10',
    AAS_OAUTH_LOCAL_DOCUMENTS: '1',
  });
});
after(async () => {
  await aasd?.stop();
  await smtp?.stop();
  await stripe?.close();
});

// A client with an address of its own, so limits counted per address
// never mix between tests (aasd trusts X-Real-IP from loopback here).
function client() {
  const c = new WebClient(aasd.url);
  const addr = `198.51.100.${crypto.randomInt(1, 255)}-${crypto.randomBytes(3).toString('hex')}`;
  const { get, post: p } = c;
  c.get = (path, h = {}) => get.call(c, path, { 'x-real-ip': addr, ...h });
  c.post = (path, f, h = {}) => p.call(c, path, f, { 'x-real-ip': addr, ...h });
  return c;
}

async function signUp(c, email = randomEmail()) {
  const r = await signUpAndLogIn(c, email);
  assert.equal(r.headers.get('location'), '/dashboard');
  return email;
}

async function verify(c, email) {
  const mail = await smtp.waitFor(email, { subject: 'Verify' });
  const link = linkIn(mail, '/verify?code=');
  const r = await c.openLink(link);
  assert.equal(r.status, 200, r.text);
  return link;
}

async function balanceText(c) {
  const r = await c.get('/dashboard');
  const m = r.text.match(/id="balance">([^<]*)</);
  assert.ok(m, r.text.slice(0, 400));
  return m[1];
}

test('pages carry a strict CSP, no framing, and host-only cookies', async () => {
  const c = client();
  const r = await c.get('/signup');
  assert.equal(r.status, 200);
  const csp = r.headers.get('content-security-policy');
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.doesNotMatch(csp, /unsafe-inline/);
  assert.equal(r.headers.get('x-frame-options'), 'DENY');
  assert.doesNotMatch(r.text, /<script>|<script [^>]*>[^<]/, 'no inline script');
  for (const ck of r.headers.getSetCookie()) {
    assert.match(ck, /HttpOnly/);
    assert.doesNotMatch(ck, /Domain=/i, 'host-only: preview hosts never get it');
  }
  const js = await fetch(`${aasd.url}/static/app.js`);
  assert.equal(js.status, 200);
  assert.match(js.headers.get('content-type'), /javascript/);
  // Auth errors and get_service_info send new users to the sign-up page.
  const res = await post(aasd.mcpUrl, initializeBody(), { ...JSON_HEADERS, 'x-api-key': 'aas_sk_nope' });
  assert.equal(res.status, 401);
  assert.match(res.text, /\/signup/);
});

test('sign-up refuses a weak password and a bad address; a taken one answers as a new one', async () => {
  const c = client();
  const email = randomEmail();
  let r = await c.submit('/signup', '/signup', { email, password: 'password123' });
  assert.equal(r.status, 400);
  assert.match(r.text, /common|guess/i);
  r = await c.submit('/signup', '/signup', { email, password: 'short' });
  assert.equal(r.status, 400);
  assert.match(r.text, /at least 10/);
  r = await c.submit('/signup', '/signup', { email: 'not-an-address', password: GOOD_PASSWORD });
  assert.equal(r.status, 400);
  assert.match(r.text, /e-mail address/);
  assert.equal(await psql(`SELECT count(*) FROM accounts WHERE email = '${email}'`), '0');
  await signUp(c, email);
  const other = client();
  const since = (await smtp.messages()).length;
  r = await other.submit('/signup', '/signup', { email: email.toUpperCase(), password: GOOD_PASSWORD });
  assert.equal(r.status, 200);
  assert.match(r.text, /Check your mail/);
  assert.equal(r.headers.getSetCookie().some((ck) => /aas_session/.test(ck)), false);
  assert.equal(await psql(`SELECT count(*) FROM accounts WHERE lower(email) = '${email}'`), '1');
  // The owner hears of it.
  const notice = await smtp.waitFor(email, { subject: 'Your aas account', since });
  assert.match(notice.text, /has an\s+account already/);
});

test('a form without its token, or with a wrong one, or from another site is refused', async () => {
  const c = client();
  const email = randomEmail();
  let r = await c.post('/signup', { email, password: GOOD_PASSWORD });
  assert.equal(r.status, 403);
  r = await c.post('/signup', { email, password: GOOD_PASSWORD, csrf: 'a'.repeat(64) });
  assert.equal(r.status, 403);
  const token = await c.csrf('/signup');
  r = await c.post('/signup', { email, password: GOOD_PASSWORD, csrf: token },
    { origin: 'https://evil.example' });
  assert.equal(r.status, 403);
  assert.equal(await psql(`SELECT count(*) FROM accounts WHERE email = '${email}'`), '0');
  // Logged in: the session's token, not the sign-up page's.
  await signUp(c, email);
  r = await c.post('/dashboard/keys', { name: 'x', csrf: token });
  assert.equal(r.status, 403);
  r = await c.post('/dashboard/keys', { name: 'x' });
  assert.equal(r.status, 403);
  const acct = await psql(`SELECT id FROM accounts WHERE email = '${email}'`);
  assert.equal(await psql(`SELECT count(*) FROM api_keys WHERE account_id = '${acct}'`), '0');
});

test('verification grants the free credit once; links are single-use and expire', async () => {
  const c = client();
  const email = await signUp(c);
  assert.equal(await balanceText(c), '$0.00');
  const link = await verify(c, email);
  assert.equal(await balanceText(c), '$0.20');
  let r = await c.get(link.pathname + link.search);
  assert.equal(r.status, 409);
  assert.match(r.text, /used already/);
  r = await c.get('/verify?code=' + '0'.repeat(64));
  assert.equal(r.status, 404);
  r = await c.get('/verify?code=<script>');
  assert.equal(r.status, 404);
  assert.doesNotMatch(r.text, /<script>/);
  assert.equal(await balanceText(c), '$0.20');
  // A second account's link, expired before use.
  const c2 = client();
  const email2 = await signUp(c2);
  const mail = await smtp.waitFor(email2, { subject: 'Verify' });
  const link2 = linkIn(mail, '/verify?code=');
  await psql(`UPDATE email_links SET expires_at = now() - interval '1 second' WHERE account_id =
    (SELECT id FROM accounts WHERE email = '${email2}')`);
  r = await c2.get(link2.pathname + link2.search);
  assert.equal(r.status, 410);
  assert.match(r.text, /expired/);
  assert.equal(await balanceText(c2), '$0.00');
});

test('wrong passwords lock the login, and the page says when to retry', async () => {
  const c = client();
  const email = await signUp(c);
  const other = client();
  for (let i = 0; i < 3; i++) {
    const r = await other.submit('/login', '/login', { email, password: 'not the password' });
    assert.equal(r.status, 401);
    assert.match(r.text, /Wrong e-mail address or password/);
  }
  let r = await other.submit('/login', '/login', { email, password: GOOD_PASSWORD });
  assert.equal(r.status, 429);
  assert.match(r.text, /try again in \d+ minutes?/);
  // An unknown address is answered as a wrong password.
  r = await other.submit('/login', '/login', { email: randomEmail(), password: GOOD_PASSWORD });
  assert.equal(r.status, 401);
  assert.match(r.text, /Wrong e-mail address or password/);
});

// A page with its tokens and the address typed into it taken out.
function plain(text, email) {
  return text.replace(/[0-9a-f]{64}/g, 'T').split(email).join('E');
}

function median(v) {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

test('sign-up, login and reset answer alike for a known and an unknown address', async () => {
  const known = await signUp(client());
  const unknown = randomEmail();
  const answers = {};
  for (const [name, email] of [['known', known], ['unknown', unknown]]) {
    const c = client();
    const s = await c.submit('/signup', '/signup', { email, password: GOOD_PASSWORD });
    const ms = [];
    let l;
    for (let i = 0; i < 5; i++) {
      const from = client(); // each under the lockout of its own address
      const csrf = await from.csrf('/login');
      const t0 = performance.now();
      l = await from.post('/login', { csrf, email, password: 'not the password' });
      ms.push(performance.now() - t0);
    }
    const r = await c.submit('/reset', '/reset', { email });
    answers[name] = {
      signup: [s.status, plain(s.text, email)], login: [l.status, plain(l.text, email)],
      reset: [r.status, plain(r.text, email)], ms: median(ms),
    };
  }
  for (const k of ['signup', 'login', 'reset']) assert.deepEqual(answers.known[k], answers.unknown[k], k);
  assert.equal(answers.known.signup[0], 200);
  assert.equal(answers.known.login[0], 401);
  console.log(`login, median of 5: known address ${answers.known.ms.toFixed(1)} ms, unknown ${answers.unknown.ms.toFixed(1)} ms`);
  assert.ok(answers.known.ms < 3 * answers.unknown.ms && answers.unknown.ms < 3 * answers.known.ms,
    JSON.stringify([answers.known.ms, answers.unknown.ms]));
  // The unknown address's sign-up made an account: the known one's did not.
  assert.equal(await psql(`SELECT count(*) FROM accounts WHERE lower(email) = '${known}'`), '1');
  assert.equal(await psql(`SELECT count(*) FROM accounts WHERE lower(email) = '${unknown}'`), '1');
});

test('an attacker failing 100 times from one address does not lock the owner out', async () => {
  const owner = client();
  const email = await signUp(owner);
  const attacker = client();
  let locked = 0;
  for (let i = 0; i < 100; i++) {
    const csrf = await attacker.csrf('/login');
    const r = await attacker.post('/login', { csrf, email, password: 'not the password' });
    assert.ok(r.status === 401 || r.status === 429, String(r.status));
    locked += r.status === 429;
  }
  assert.ok(locked >= 90, `only ${locked} answers were the lockout`);
  const r = await client().submit('/login', '/login', { email, password: GOOD_PASSWORD });
  assert.equal(r.status, 303, r.text.slice(0, 400));
});

test('password reset: a single-use link, the new password, old sessions ended', async () => {
  const c = client();
  const email = await signUp(c);
  const stranger = client();
  let r = await stranger.submit('/reset', '/reset', { email });
  assert.equal(r.status, 200);
  const same = await stranger.submit('/reset', '/reset', { email: randomEmail() });
  assert.equal(same.status, 200);
  assert.equal(same.text.replace(/value="[0-9a-f]{64}"/g, ''), r.text.replace(/value="[0-9a-f]{64}"/g, ''),
    'the answer does not tell whether an account exists');
  const mail = await smtp.waitFor(email, { subject: 'Reset' });
  const link = linkIn(mail, '/reset/confirm?code=');
  r = await stranger.get(link.pathname + link.search);
  assert.equal(r.status, 200);
  const code = link.searchParams.get('code');
  r = await stranger.submit(link.pathname + link.search, '/reset/confirm', { code, password: 'weak' });
  assert.equal(r.status, 400);
  r = await stranger.submit(link.pathname + link.search, '/reset/confirm',
    { code, password: 'a brand new passphrase' });
  assert.equal(r.status, 303);
  r = await stranger.submit('/reset', '/reset/confirm', { code, password: 'another new passphrase' });
  assert.equal(r.status, 409);
  // The first browser's session ended with the old password.
  r = await c.get('/dashboard');
  assert.equal(r.status, 303);
  assert.equal(r.headers.get('location'), '/login');
  const fresh = client();
  r = await fresh.submit('/login', '/login', { email, password: GOOD_PASSWORD });
  assert.equal(r.status, 401);
  r = await fresh.submit('/login', '/login', { email, password: 'a brand new passphrase' });
  assert.equal(r.status, 303);
});

// initialize with the key: 200 while it is live, 401 once revoked.
async function mcpWith(key) {
  return post(aasd.mcpUrl, initializeBody(), { ...JSON_HEADERS, 'x-api-key': key });
}

test('keys made on the dashboard work on /v1/mcp until revoked there; another account\'s key is not found', async () => {
  const c = client();
  const email = await signUp(c);
  // No key before the address is verified.
  let r = await c.submit('/dashboard/keys', '/dashboard/keys', { name: 'too early' });
  assert.equal(r.status, 403);
  assert.match((await c.get('/dashboard/keys')).text, /id="verify-first"/);
  await verify(c, email);
  r = await c.submit('/dashboard/keys', '/dashboard/keys', { name: 'laptop <b>' });
  assert.equal(r.status, 201);
  const key = r.text.match(/id="new-key">(aas_sk_[A-Za-z0-9_-]+)</)[1];
  assert.ok(r.text.includes(`x-api-key: ${key}`), 'the Connect snippets carry the new key');
  assert.doesNotMatch(r.text, /laptop <b>/);
  r = await c.get('/dashboard/keys');
  assert.ok(!r.text.includes(key), 'a key is shown once');
  assert.match(r.text, /laptop &lt;b&gt;/);
  assert.equal((await mcpWith(key)).status, 200);

  const other = client();
  await signUp(other);
  const keyId = await psql(`SELECT k.id FROM api_keys k JOIN accounts a ON a.id = k.account_id
    WHERE a.email = '${email}'`);
  r = await other.submit('/dashboard/keys', `/dashboard/keys/${keyId}/revoke`, {});
  assert.equal(r.status, 404);
  assert.equal((await mcpWith(key)).status, 200, 'another account cannot revoke it');
  r = await other.submit('/dashboard/keys', '/dashboard/keys/not-a-uuid/revoke', {});
  assert.equal(r.status, 404);

  r = await c.submit('/dashboard/keys', `/dashboard/keys/${keyId}/revoke`, {});
  assert.equal(r.status, 303);
  let status = 0;
  for (let i = 0; i < 50 && status !== 401; i++) {
    status = (await mcpWith(key)).status;
    if (status !== 401) await new Promise((res) => setTimeout(res, 100));
  }
  assert.equal(status, 401, 'a revoked key is refused on /v1/mcp');
});

test('logout ends the session', async () => {
  const c = client();
  await signUp(c);
  const sid = [...c.cookies.entries()].find(([k]) => k.endsWith('aas_session'));
  assert.ok(sid);
  let r = await c.submit('/dashboard', '/logout', {});
  assert.equal(r.status, 200);
  // The old cookie, sent again, is no session.
  c.cookies.set(sid[0], sid[1]);
  r = await c.get('/dashboard');
  assert.equal(r.status, 303);
});

function checkoutEvent(id, session, account, cents, extra = {}) {
  return JSON.stringify({
    id,
    object: 'event',
    type: 'checkout.session.completed',
    data: {
      object: {
        id: session, object: 'checkout.session', payment_status: 'paid', currency: 'usd',
        amount_total: cents, client_reference_id: account, metadata: { account_id: account },
        ...extra,
      },
    },
  });
}

async function deliver(body, sig = stripeSign(WEBHOOK_SECRET, body)) {
  const r = await fetch(`${aasd.url}/v1/billing/stripe/webhook`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': sig }, body,
  });
  return { status: r.status, body: await r.json() };
}

test('buying credit: checkout at Stripe, credit once per paid checkout from signed webhooks', async () => {
  const c = client();
  const email = await signUp(c);
  const account = await psql(`SELECT id FROM accounts WHERE email = '${email}'`);
  let r = await c.get('/dashboard/usage');
  assert.match(r.text, /Pay with Stripe/);
  r = await c.submit('/dashboard/usage', '/dashboard/billing/checkout', { amount: '7' });
  assert.equal(r.status, 400, 'only the amounts offered');
  r = await c.submit('/dashboard/usage', '/dashboard/billing/checkout', { amount: '10' });
  assert.equal(r.status, 303);
  assert.ok(r.headers.get('location').startsWith(`${stripe.url}/pay/cs_test_`));
  const req = stripe.requests.at(-1);
  assert.equal(req.headers.authorization, 'Bearer sk_test_aas');
  assert.equal(req.form.get('line_items[0][price_data][unit_amount]'), '1000');
  assert.equal(req.form.get('metadata[account_id]'), account);
  assert.equal(req.form.get('customer_email'), email);
  assert.equal(await balanceText(c), '$0.00', 'nothing is credited before Stripe confirms');

  const evt = `evt_${crypto.randomBytes(8).toString('hex')}`;
  const body = checkoutEvent(evt, req.id, account, 1000);
  // Bad signatures change nothing.
  assert.equal((await deliver(body, 'garbage')).status, 400);
  assert.equal((await deliver(body, stripeSign('whsec_other', body))).status, 400);
  const old = Math.floor(Date.now() / 1000) - 3600;
  assert.equal((await deliver(body, stripeSign(WEBHOOK_SECRET, body, old))).status, 400);
  assert.equal((await deliver(body.replace('1000', '9000'), stripeSign(WEBHOOK_SECRET, body))).status, 400);
  assert.equal(await balanceText(c), '$0.00');

  // Signed, but not what this service asked for: another amount, or a
  // checkout it never made (a Payment Link on the same Stripe account).
  let d = await deliver(checkoutEvent(`evt_${crypto.randomBytes(8).toString('hex')}`, req.id, account, 90000));
  assert.deepEqual([d.status, d.body.credited], [200, false]);
  d = await deliver(checkoutEvent(`evt_${crypto.randomBytes(8).toString('hex')}`, 'cs_elsewhere', account, 1000));
  assert.deepEqual([d.status, d.body.credited], [200, false]);
  assert.equal(await balanceText(c), '$0.00');

  d = await deliver(body);
  assert.equal(d.status, 200);
  assert.equal(d.body.credited, true);
  assert.equal(await balanceText(c), '$10.00');
  // The same event again, and another event for the same checkout: nothing more.
  d = await deliver(body);
  assert.deepEqual([d.status, d.body.credited], [200, false]);
  d = await deliver(checkoutEvent(`evt_${crypto.randomBytes(8).toString('hex')}`, req.id, account, 1000));
  assert.deepEqual([d.status, d.body.credited], [200, false]);
  // An unpaid or foreign-currency session, or another event type: recorded, not credited.
  d = await deliver(checkoutEvent(`evt_${crypto.randomBytes(8).toString('hex')}`, 'cs_unpaid', account, 500,
    { payment_status: 'unpaid' }));
  assert.deepEqual([d.status, d.body.credited], [200, false]);
  d = await deliver(JSON.stringify({ id: `evt_${crypto.randomBytes(8).toString('hex')}`, type: 'charge.refunded', data: { object: {} } }));
  assert.deepEqual([d.status, d.body.credited], [200, false]);
  assert.equal(await balanceText(c), '$10.00');
  assert.equal(await psql(`SELECT count(*) FROM ledger WHERE account_id = '${account}' AND kind = 'grant'`), '1');
  r = await c.get('/dashboard/usage.csv');
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /text\/csv/);
  assert.match(r.text, new RegExp(`grant",10\\.000000,10000000,,"","credit bought \\(stripe checkout ${req.id}\\)"`));
});

test('a refund takes the credit back once; checkouts an account may start are bounded', async () => {
  const c = client();
  const email = await signUp(c);
  const account = await psql(`SELECT id FROM accounts WHERE email = '${email}'`);
  let r = await c.submit('/dashboard/usage', '/dashboard/billing/checkout', { amount: '10' });
  assert.equal(r.status, 303);
  const pi = `pi_${crypto.randomBytes(8).toString('hex')}`;
  let d = await deliver(checkoutEvent(`evt_${crypto.randomBytes(8).toString('hex')}`,
    stripe.requests.at(-1).id, account, 1000, { payment_intent: pi }));
  assert.equal(d.body.credited, true);
  assert.equal(await balanceText(c), '$10.00');
  const refund = JSON.stringify({
    id: `evt_${crypto.randomBytes(8).toString('hex')}`, object: 'event', type: 'charge.refunded',
    data: { object: { id: 'ch_1', object: 'charge', currency: 'usd', amount: 1000, amount_refunded: 250, payment_intent: pi } },
  });
  for (let i = 0; i < 2; i++) assert.equal((await deliver(refund)).status, 200);
  assert.equal(await balanceText(c), '$7.50');
  assert.equal(await psql(`SELECT (balance = (SELECT sum(amount) FROM ledger WHERE account_id = '${account}'))::text FROM accounts WHERE id = '${account}'`), 'true');
  // Three open (unpaid) checkouts at most (AAS_CHECKOUTS_OPEN).
  for (let i = 0; i < 3; i++) {
    r = await c.submit('/dashboard/usage', '/dashboard/billing/checkout', { amount: '5' });
    assert.equal(r.status, 303);
  }
  const made = stripe.requests.length;
  r = await c.submit('/dashboard/usage', '/dashboard/billing/checkout', { amount: '5' });
  assert.equal(r.status, 429);
  assert.match(r.text, /checkouts are open/);
  assert.equal(stripe.requests.length, made, 'no Stripe session was made');
});

test('another site\'s links cannot spend an account\'s client-document fetches', async () => {
  // Client ID Metadata Documents for any name, on loopback.
  const docs = http.createServer((req, res) => {
    const name = /^\/clients\/([a-z0-9]+)\.json$/.exec(req.url)?.[1];
    if (!name) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ client_id: `${base}${req.url}`, client_name: `App ${name}`,
      redirect_uris: [`${base}/callback`], token_endpoint_auth_method: 'none' }));
  });
  await new Promise((r) => docs.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${docs.address().port}`;
  const query = (name) => new URLSearchParams({
    response_type: 'code', client_id: `${base}/clients/${name}.json`, redirect_uri: `${base}/callback`,
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256', state: 's',
  }).toString();
  try {
    const c = client();
    const email = await signUp(c);
    await verify(c, email);
    const account = await psql(`SELECT id FROM accounts WHERE email = '${email}'`);
    // A hostile page navigates the victim's browser (its cookie goes along
    // on a top-level GET) to 60 documents of its choosing.
    for (let i = 0; i < 60; i++) {
      const r = await c.get(`/oauth/authorize?${query(`evil${i}`)}`, { 'sec-fetch-site': 'cross-site' });
      assert.equal(r.status, 200, r.text.slice(0, 300));
    }
    assert.equal(await psql(`SELECT count(*) FROM auth_events WHERE subject = 'oauth_fetch:${account}'`), '0');
    // The owner still connects the application they want: past the
    // address's fetches, one click (this site's own form) goes on.
    let r = await c.get(`/oauth/authorize?${query('real')}`);
    if (r.status === 429) {
      const csrf = r.text.match(/name="csrf" value="([0-9a-f]{64})"/)?.[1];
      assert.ok(csrf && /value="continue"/.test(r.text), r.text.slice(0, 600));
      r = await c.post('/oauth/authorize', { ...Object.fromEntries(new URLSearchParams(query('real'))), csrf, decision: 'continue' });
    }
    assert.equal(r.status, 200, r.text.slice(0, 600));
    assert.match(r.text, /App real/);
    assert.match(r.text, /id="approve"/);
    // Without the form's token the POST spends nothing.
    r = await c.post('/oauth/authorize', { ...Object.fromEntries(new URLSearchParams(query('other'))), decision: 'continue' });
    assert.equal(r.status, 403);
  } finally {
    await new Promise((r) => docs.close(r));
  }
});

test('a new address takes effect through the link sent to it; deleting the account ends its keys and frees its address', async () => {
  const c = client();
  const email = await signUp(c);
  const taken = await signUp(client());
  let r = await c.submit('/dashboard/settings', '/dashboard/settings/email',
    { email: taken, current: GOOD_PASSWORD });
  assert.equal(r.status, 409);
  const fresh = randomEmail('moved');
  r = await c.submit('/dashboard/settings', '/dashboard/settings/email',
    { email: fresh, current: 'not the password' });
  assert.equal(r.status, 400);
  assert.match(r.text, /current password is not right/);
  r = await c.submit('/dashboard/settings', '/dashboard/settings/email', { email: fresh, current: GOOD_PASSWORD });
  assert.equal(r.status, 200);
  await smtp.waitFor(email, { subject: 'is changing' });
  const mail = await smtp.waitFor(fresh, { subject: 'Confirm your new' });
  const link = linkIn(mail, '/email/confirm?code=');
  r = await c.get('/dashboard/settings');
  assert.match(r.text, new RegExp(`id="email">${email}<`), 'unchanged until the link is opened');
  r = await client().openLink(link);
  assert.equal(r.status, 200);
  r = await c.get('/dashboard/settings');
  assert.match(r.text, new RegExp(`id="email">${fresh}<`));
  r = await client().get(link.pathname + link.search);
  assert.equal(r.status, 409);

  r = await c.submit('/dashboard/keys', '/dashboard/keys', { name: 'before deletion' });
  const key = r.text.match(/id="new-key">(aas_sk_[A-Za-z0-9_-]+)</)[1];
  assert.equal((await mcpWith(key)).status, 200);
  r = await c.submit('/dashboard/settings', '/dashboard/settings/delete', { current: 'wrong password!' });
  assert.equal(r.status, 400);
  assert.equal((await mcpWith(key)).status, 200, 'a wrong password deletes nothing');
  r = await c.submit('/dashboard/settings', '/dashboard/settings/delete', { current: GOOD_PASSWORD });
  assert.equal(r.status, 200);
  assert.match(r.text, /Account deleted/);
  assert.equal((await mcpWith(key)).status, 401);
  r = await c.get('/dashboard');
  assert.equal(r.status, 303);
  const again = client();
  r = await again.submit('/login', '/login', { email: fresh, password: GOOD_PASSWORD });
  assert.equal(r.status, 401);
  assert.equal(await psql(`SELECT count(*) FROM accounts WHERE lower(email) = '${fresh}'`), '0');
  await signUp(again, fresh);
});
