// The MCP conformance suite (@modelcontextprotocol/conformance 0.2.0-alpha.12,
// the newest release, pinned in package-lock.json) against the real aasd:
// its server scenarios at both wires (2025-11-25 with sessions and the
// stateless 2026-07-28), and its authorization-server scenarios with the
// consent given on the dashboard. The suite's build needs Node 22's
// fs.globSync; lib/node20/ supplies it (a module hook, nothing patched).
//
// Server scenarios run against an aasd with AAS_OAUTH=0: the suite sends
// no credential, and with OAuth on a tool call without one is a 401 (by
// design, docs/oauth.md) where the suite expects a result.
// Checks expected to fail, with reasons: tests/e2e/conformance-baseline.yml.
// Scenarios not run, and why:
//   tools-call-*, elicitation-*, json-schema-2020-12, input-required-result-*,
//   server-sse-polling        call the suite's fixture tools (test_simple_text, ...)
//   resources-*, prompts-*, sep-2164-resource-not-found
//                             aas declares neither capability
//   logging-set-level, tools-call-with-logging
//                             aas declares no logging capability
//   completion-complete       aas declares no completions capability
//   tasks-*                   extension scenarios built on the suite's fixture
//                             task tools, run without a credential (aas's tasks
//                             belong to an account): tests/e2e/mcp2026.test.mjs
//                             covers aas's tasks
//   sep-2640-skills-*         an extension aas does not implement
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { startAasd, ROOT, freePort } from './lib/harness.mjs';
import { startSmtpSink } from './lib/smtp.mjs';
import { WebClient, randomEmail, GOOD_PASSWORD, linkIn, signUpAndLogIn } from './lib/web.mjs';

const run = promisify(execFile);
const CLI = path.join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const NODE_ARGS = ['--import', path.join(ROOT, 'tests/e2e/lib/node20/register.mjs'), CLI];
const BASELINE = path.join(ROOT, 'tests/e2e/conformance-baseline.yml');
const ENV = { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' };
const V2026 = '2026-07-28';
const SERVER = [
  ['server-initialize'],
  ['server-session-lifecycle'],
  ['ping'],
  ['tools-list'],
  ['dns-rebinding-protection'],
  ['server-sse-multiple-streams'],
  ['server-stateless', V2026],
  ['tools-list', V2026],
  ['dns-rebinding-protection', V2026],
  ['server-sse-multiple-streams', V2026],
  ['caching', V2026],
  ['http-header-validation', V2026],
  ['http-custom-header-server-validation', V2026],
];

let keysOnly;
let oauth;
let smtp;

before(async () => {
  smtp = await startSmtpSink();
  keysOnly = await startAasd({ AAS_OAUTH: '0' });
  oauth = await startAasd({
    AAS_SMTP_URL: smtp.url,
    AAS_MAIL_FROM: 'aas test <noreply@aas.test>',
    AAS_ARGON2_M_KIB: '8192',
    AAS_ARGON2_T_COST: '1',
    AAS_TRUST_X_REAL_IP: '1',
  });
});
after(async () => {
  await keysOnly?.stop();
  await oauth?.stop();
  await smtp?.stop();
});

// eslint-disable-next-line no-control-regex
const plain = (s) => s.replace(/\x1b\[[0-9;]*m/g, '');

function summary(out) {
  const m = out.match(/Passed: (\d+)\/(\d+), (\d+) failed/);
  assert.ok(m, `no summary line:\n${out}`);
  return { passed: Number(m[1]), total: Number(m[2]), failed: Number(m[3]) };
}

for (const [scenario, version] of SERVER) {
  test(`conformance: ${scenario}${version ? ` at ${version}` : ''}`, async () => {
    // The suite requires a loopback host name in the URL.
    const url = `http://localhost:${keysOnly.port}/v1/mcp`;
    const args = [...NODE_ARGS, 'server', '--url', url, '--scenario', scenario,
      '--expected-failures', BASELINE];
    if (version) args.push('--spec-version', version);
    const res = await run(process.execPath, args, { cwd: ROOT, timeout: 90000, env: ENV })
      .then((r) => ({ code: 0, out: r.stdout + r.stderr }), (e) => ({ code: e.code, out: `${e.stdout}${e.stderr}` }));
    const out = plain(res.out);
    assert.equal(res.code, 0, out);
    const s = summary(out);
    assert.ok(s.passed >= 1, out);
    // Every failure is one the baseline names (the exit status says so).
    assert.ok(s.failed === 0 || /Baseline check passed/.test(out), out);
  });
}

test('conformance: the authorization server (metadata, code grant with PKCE)', async () => {
  const port = await freePort();
  const redirect = `http://127.0.0.1:${port}/callback`;
  const reg = await fetch(`${oauth.url}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-real-ip': `198.51.100.${port % 250}` },
    body: JSON.stringify({ client_name: 'conformance', redirect_uris: [redirect] }),
  });
  assert.equal(reg.status, 201);
  const clientId = (await reg.json()).client_id;

  // A verified account, logged in, to consent with.
  const web = new WebClient(oauth.url);
  // An address of its own: sign-ups are limited per client address.
  const { get, post } = web;
  web.get = (p, h = {}) => get.call(web, p, { 'x-real-ip': `198.51.100.${port % 250}`, ...h });
  web.post = (p, f, h = {}) => post.call(web, p, f, { 'x-real-ip': `198.51.100.${port % 250}`, ...h });
  const email = randomEmail('conformance');
  await signUpAndLogIn(web, email);
  const link = linkIn(await smtp.waitFor(email, { subject: 'Verify' }), '/verify?code=');
  assert.equal((await web.openLink(link)).status, 200);

  const child = spawn(process.execPath, [...NODE_ARGS, 'authorization', '--url', oauth.url,
    '--client-id', clientId, '--resource', `${oauth.url}/v1/mcp`, '-p', String(port)],
  { cwd: ROOT, env: ENV, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    // The suite prints the authorization URL and waits for its callback.
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    let url;
    for (let i = 0; i < 600 && !url; i++) {
      url = plain(out).match(/^(http:\/\/127\.0\.0\.1:\d+\/oauth\/authorize\?\S+)$/m)?.[1];
      if (!url) await sleep(50);
    }
    assert.ok(url, `no authorization URL:\n${plain(out)}`);
    for (let i = 0; i < 100 && !/Callback server started/.test(out); i++) await sleep(50);
    const u = new URL(url);
    const page = await web.get(u.pathname + u.search);
    assert.equal(page.status, 200, page.text);
    const csrf = page.text.match(/name="csrf" value="([0-9a-f]{64})"/)[1];
    const approve = await web.post('/oauth/authorize',
      { ...Object.fromEntries(u.searchParams), csrf, decision: 'approve' });
    assert.equal(approve.status, 303, approve.text);
    const back = approve.headers.get('location');
    assert.ok(back.startsWith(redirect), back);
    await fetch(back);
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 60000))]);
    const text = plain(out);
    assert.equal(code, 0, text);
    const total = text.match(/Total: (\d+) passed, (\d+) failed/);
    assert.ok(total, text);
    assert.equal(total[2], '0', text);
    assert.match(text, /authorization-server-metadata-endpoint: [1-9]\d* passed, 0 failed/);
    assert.match(text, /authorization-code-grant: [1-9]\d* passed, 0 failed/);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
  }
});
