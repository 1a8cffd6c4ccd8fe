// The dashboard in headless Chromium: sign up, read the verification mail
// from a local SMTP sink, verify and see the free credit, create a key,
// use it with the official MCP SDK to create a sandbox and run a command,
// see the sandbox on the dashboard and destroy it there, then find the
// charge and the refund in Usage and in the CSV. Every page is checked
// with axe-core (no serious or critical violations) and screenshotted
// under the test log directory; the main flow is also done with the
// keyboard alone.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startAasd, vmEnv, psql } from './lib/harness.mjs';
import { startSmtpSink } from './lib/smtp.mjs';
import {
  launchBrowser, closeBrowser, screenshot, checkA11y, formFill, clickAndWait,
} from './lib/browser.mjs';
import { WebClient, randomEmail, GOOD_PASSWORD, linkIn, signUpAndLogIn } from './lib/web.mjs';

let aasd;
let smtp;
let browser;
// Sandboxes made here, destroyed in after() whatever happened.
const made = [];

before(async () => {
  smtp = await startSmtpSink();
  aasd = await startAasd(vmEnv('dashboard', {
    AAS_SMTP_URL: smtp.url,
    AAS_ARGON2_M_KIB: '8192',
    AAS_ARGON2_T_COST: '1',
  }));
  browser = await launchBrowser();
});
after(async () => {
  for (const { key, id } of made) {
    await fetch(`${aasd.url}/v1/sandboxes/${id}`, { method: 'DELETE', headers: { 'x-api-key': key } })
      .catch(() => {});
  }
  await closeBrowser(browser);
  await aasd?.stop();
  await smtp?.stop();
});

// Screenshot and accessibility check of the page as it is.
async function look(page, name) {
  await screenshot(page, `dashboard-${name}`);
  const v = await checkA11y(page);
  assert.deepEqual(v, [], `${name}: accessibility violations ${JSON.stringify(v, null, 1)}`);
}

async function text(page, selector) {
  return page.$eval(selector, (e) => e.textContent.trim());
}

async function mcpClient(key) {
  const transport = new StreamableHTTPClientTransport(new URL(aasd.mcpUrl),
    { requestInit: { headers: { 'x-api-key': key } } });
  const client = new Client({ name: 'aas-dashboard-e2e', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

test('sign up, verify, key, sandbox over MCP, destroy on the dashboard, charge and refund in Usage', async () => {
  const page = await browser.newPage();
  const email = randomEmail('dash');
  await page.goto(`${aasd.url}/`);
  await look(page, 'home');
  await clickAndWait(page, 'a.button[href="/signup"]');
  await look(page, 'signup');
  await formFill(page, { email, password: GOOD_PASSWORD });
  await clickAndWait(page, 'main button[type=submit]');
  // The same answer whether or not the address had an account: no session.
  assert.equal(new URL(page.url()).pathname, '/signup');
  assert.match(await text(page, 'main'), /Check your mail/);
  await clickAndWait(page, 'main a[href="/login"]');
  await formFill(page, { email, password: GOOD_PASSWORD });
  await clickAndWait(page, 'main button[type=submit]');
  assert.equal(new URL(page.url()).pathname, '/dashboard');
  assert.match(await text(page, '.banner'), /Open it to verify/);
  assert.equal(await text(page, '#balance'), '$0.00');
  await look(page, 'overview-unverified');

  const mail = await smtp.waitFor(email, { subject: 'Verify' });
  assert.match(mail.from, /noreply/);
  await page.goto(linkIn(mail, '/verify?code=').href);
  // Opening the link changes nothing: its page's button does.
  await clickAndWait(page, 'main button[type=submit]');
  assert.match(await text(page, 'main'), /verified/);
  await look(page, 'verified');
  await clickAndWait(page, 'main a[href="/dashboard"]');
  assert.equal(await text(page, '#balance'), '$0.20');
  assert.equal(await page.$('.banner'), null);
  await look(page, 'overview');

  await clickAndWait(page, 'nav a[href="/dashboard/keys"]');
  await look(page, 'keys-empty');
  await formFill(page, { name: 'browser test' });
  await clickAndWait(page, 'main form button[type=submit]');
  const key = await text(page, '#new-key');
  assert.match(key, /^aas_sk_[A-Za-z0-9_-]{43}$/);
  assert.ok((await text(page, '#snip-cc')).includes(`x-api-key: ${key}`));
  assert.ok(!page.url().includes(key), 'never a key in a URL');
  await look(page, 'key-created');

  const client = await mcpClient(key);
  const created = await client.callTool({ name: 'create_sandbox',
    arguments: { size: 'small', timeout_minutes: 10 } }, undefined, { timeout: 300000 });
  assert.ok(!created.isError, created.content?.[0]?.text);
  const id = created.structuredContent.sandbox_id;
  made.push({ key, id });
  const ran = await client.callTool({ name: 'run_command',
    arguments: { sandbox_id: id, command: 'echo hello from $(whoami)' } }, undefined, { timeout: 120000 });
  assert.ok(!ran.isError, ran.content?.[0]?.text);
  assert.equal(ran.structuredContent.stdout, 'hello from sandbox\n');

  await clickAndWait(page, 'nav a[href="/dashboard/sandboxes"]');
  const row = `tr[data-sandbox="${id}"]`;
  assert.ok(await page.$(row), 'the new sandbox is listed');
  assert.match(await text(page, `${row} td:nth-child(2)`), /running/);
  assert.match(await text(page, `${row} td:nth-child(6)`), /^\$0\.0[0-9]$/);
  await look(page, 'sandboxes');

  // The terminal in the browser, through its single-use ticket.
  await clickAndWait(page, `${row} a[href$="/terminal"]`);
  await page.waitForFunction(() => document.getElementById('term-status').textContent === 'Connected.',
    { timeout: 60000 });
  await page.type('#term-in', 'echo term-$((6*7))');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.getElementById('term-out').textContent.includes('term-42'),
    { timeout: 60000 });
  await look(page, 'terminal');
  await clickAndWait(page, 'main a[href="/dashboard/sandboxes"]');

  // Another account cannot act on it from its own dashboard.
  const stranger = new WebClient(aasd.url);
  await signUpAndLogIn(stranger, randomEmail('stranger'));
  let r = await stranger.submit('/dashboard/sandboxes', `/dashboard/sandboxes/${id}/destroy`, {});
  assert.equal(r.status, 404, r.text.slice(0, 300));
  r = await stranger.submit('/dashboard/sandboxes', `/dashboard/sandboxes/${id}/extend`, { minutes: '5' });
  assert.equal(r.status, 404);
  r = await stranger.get(`/dashboard/sandboxes/${id}/terminal`);
  assert.equal(r.status, 404);
  assert.doesNotMatch(r.text, /ticket=/);
  assert.equal(await psql(`SELECT state FROM sandboxes WHERE id = '${id}'`), 'running');

  await clickAndWait(page, `${row} button.danger`);
  assert.match(await text(page, 'main'), /is destroyed/);
  await look(page, 'destroyed');
  assert.equal(await psql(`SELECT state FROM sandboxes WHERE id = '${id}'`), 'destroyed');

  await clickAndWait(page, 'nav a[href="/dashboard/usage"]');
  const kinds = await page.$$eval('#ledger tbody tr', (rows) => rows.map((t) => t.className));
  assert.deepEqual(kinds.sort(), ['entry-charge', 'entry-grant', 'entry-refund']);
  assert.ok(await page.$('#spend-chart'), 'the spend chart');
  assert.match(await text(page, '#no-payments'), /operator/);
  await look(page, 'usage');
  const cookies = await page.cookies();
  const csv = await fetch(`${aasd.url}/dashboard/usage.csv`, {
    headers: { cookie: cookies.map((c) => `${c.name}=${c.value}`).join('; ') },
  });
  assert.equal(csv.status, 200);
  const rows = (await csv.text()).trim().split('\r\n');
  assert.equal(rows[0], 'id,created_at,kind,amount_usd,amount_microusd,minutes,sandbox_id,reason');
  assert.equal(rows.filter((l) => l.includes(`"${id}"`) && l.includes('"charge"')).length, 1);
  assert.equal(rows.filter((l) => l.includes(`"${id}"`) && l.includes('"refund"')).length, 1);

  for (const p of ['connect', 'settings']) {
    await clickAndWait(page, `nav a[href="/dashboard/${p}"]`);
    await look(page, p);
  }
  await client.close();
  await page.close();
});

// Presses Tab until the focused element matches `want` (a predicate on
// {tag, name, text, href}); fails after `max` presses.
async function tabTo(page, want, max = 40) {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    const el = await page.evaluate(() => {
      const e = document.activeElement;
      return e ? {
        tag: e.tagName.toLowerCase(), name: e.getAttribute('name'), text: e.textContent.trim(),
        href: e.getAttribute('href'),
      } : null;
    });
    if (el && want(el)) return el;
  }
  throw new Error(`focus never reached the element on ${page.url()}`);
}

async function enterAndWait(page) {
  await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.keyboard.press('Enter')]);
}

test('the main flow works with the keyboard alone', async () => {
  // A context of its own: no cookie of the first test's session.
  const ctx = await browser.createBrowserContext();
  const page = await ctx.newPage();
  const email = randomEmail('keys');
  await page.bringToFront();
  await page.goto(`${aasd.url}/`);
  await tabTo(page, (e) => e.href === '/signup');
  await enterAndWait(page);
  await tabTo(page, (e) => e.name === 'email');
  await page.keyboard.type(email);
  await tabTo(page, (e) => e.name === 'password');
  await page.keyboard.type(GOOD_PASSWORD);
  await enterAndWait(page);
  // Signed up, not logged in: on to the login form.
  assert.match(await text(page, 'main'), /Check your mail/);
  await tabTo(page, (e) => e.href === '/login');
  await enterAndWait(page);
  await tabTo(page, (e) => e.name === 'email');
  await page.keyboard.type(email);
  await tabTo(page, (e) => e.name === 'password');
  await page.keyboard.type(GOOD_PASSWORD);
  await enterAndWait(page);
  assert.equal(new URL(page.url()).pathname, '/dashboard');
  // The mail's link (keys come after verification), then the keyboard again.
  const mail = await smtp.waitFor(email, { subject: 'Verify' });
  await page.goto(linkIn(mail, '/verify?code=').href);
  await tabTo(page, (e) => e.tag === 'button' && e.text === 'Verify my address');
  await enterAndWait(page);
  await tabTo(page, (e) => e.href === '/dashboard' && e.text.startsWith('Go to'));
  await enterAndWait(page);
  await tabTo(page, (e) => e.href === '/dashboard/keys');
  await enterAndWait(page);
  await tabTo(page, (e) => e.name === 'name');
  await page.keyboard.type('keyboard');
  await enterAndWait(page);
  assert.match(await text(page, '#new-key'), /^aas_sk_/);
  await tabTo(page, (e) => e.tag === 'button' && e.text === 'Copy key');
  await screenshot(page, 'dashboard-keyboard-key');
  // Log out from the keyboard too.
  await tabTo(page, (e) => e.tag === 'button' && e.text === 'Log out');
  await enterAndWait(page);
  assert.match(await text(page, 'main'), /logged out/);
  await ctx.close();
});
