// A small browser stand-in for dashboard tests over fetch: cookies kept
// per client, redirects not followed, form fields read from pages.
import crypto from 'node:crypto';
import http from 'node:http';

export class WebClient {
  // `via`: a fetch of the same shape (lib/nginx.mjs: TLS with the test's CA).
  constructor(base, via = fetch) {
    this.base = base;
    this.via = via;
    this.cookies = new Map();
  }

  cookieHeader() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  keep(res) {
    for (const c of res.headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(';');
      const i = pair.indexOf('=');
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      const gone = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === '';
      if (gone) this.cookies.delete(name); else this.cookies.set(name, value);
    }
  }

  async get(path, headers = {}) {
    const res = await this.via(this.base + path, {
      redirect: 'manual', headers: { cookie: this.cookieHeader(), ...headers },
    });
    this.keep(res);
    return { status: res.status, headers: res.headers, text: await res.text() };
  }

  async post(path, fields, headers = {}) {
    const res = await this.via(this.base + path, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie: this.cookieHeader(),
        'content-type': 'application/x-www-form-urlencoded',
        ...headers,
      },
      body: new URLSearchParams(fields).toString(),
    });
    this.keep(res);
    return { status: res.status, headers: res.headers, text: await res.text() };
  }

  // The CSRF token of the first form on the page at path.
  async csrf(path) {
    const page = await this.get(path);
    const m = page.text.match(/name="csrf" value="([0-9a-f]{64})"/);
    if (!m) throw new Error(`no CSRF token on ${path} (${page.status}):\n${page.text.slice(0, 500)}`);
    return m[1];
  }

  // Opens an e-mail link as a person does: its GET shows one button (and
  // changes nothing), whose form POSTs the code with the page's token.
  // Answers the page when it has no such form (a dead link).
  async openLink(url) {
    const path = url.pathname + url.search;
    const page = await this.get(path);
    const csrf = page.text.match(/name="csrf" value="([0-9a-f]{64})"/);
    const action = page.text.match(/<form method="post" action="([^"]+)">/);
    const code = page.text.match(/name="code" value="([0-9a-f]{64})"/);
    if (page.status !== 200 || !csrf || !action || !code) return page;
    return this.post(action[1], { csrf: csrf[1], code: code[1] });
  }

  // GETs path for its token, then POSTs the form with it.
  async submit(path, action, fields) {
    const csrf = await this.csrf(path);
    return this.post(action, { csrf, ...fields });
  }
}

// Signs up (the answer is the same page whether or not the address has an
// account, and logs nobody in), then logs in as a person would.
export async function signUpAndLogIn(c, email, password = GOOD_PASSWORD) {
  const r = await c.submit('/signup', '/signup', { email, password });
  if (r.status !== 200 || !/Check your mail/.test(r.text)) {
    throw new Error(`sign-up of ${email}: ${r.status}\n${r.text.slice(0, 500)}`);
  }
  const l = await c.submit('/login', '/login', { email, password });
  if (l.status !== 303) throw new Error(`login of ${email}: ${l.status}\n${l.text.slice(0, 500)}`);
  return l;
}

export function randomEmail(tag = 'user') {
  return `${tag}-${crypto.randomBytes(6).toString('hex')}@example.com`;
}

export const GOOD_PASSWORD = 'correct horse battery staple';

// The first https?:// link in a mail body with `path` in it.
export function linkIn(mail, path) {
  const l = mail.links.find((u) => u.includes(path));
  if (!l) throw new Error(`no ${path} link in mail:\n${mail.text}`);
  return new URL(l);
}

// A Stripe-Signature header for body, as Stripe signs webhook deliveries.
export function stripeSign(secret, body, t = Math.floor(Date.now() / 1000)) {
  const v1 = crypto.createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
  return `t=${t},v1=${v1}`;
}

// A stand-in for Stripe's API on 127.0.0.1: records checkout requests and
// answers each with a session id and a page URL.
export async function startFakeStripe() {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/checkout/sessions') {
        const id = `cs_test_${crypto.randomBytes(8).toString('hex')}`;
        requests.push({ id, headers: req.headers, form: new URLSearchParams(body) });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id, object: 'checkout.session', url: `${base}/pay/${id}` }));
        return;
      }
      if (req.method === 'GET' && req.url.startsWith('/pay/')) {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<!doctype html><html lang="en"><title>Pay</title><h1>Stand-in checkout</h1></html>');
        return;
      }
      res.writeHead(404);
      res.end();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${server.address().port}`;
  return { url: base, requests, close: () => new Promise((r) => server.close(r)) };
}
