// A local SMTP sink for tests of mail the daemon sends (sign-up
// verification and the like): tests/e2e/lib/smtp_sink.py (Debian's
// python3-aiosmtpd) listens on 127.0.0.1 and keeps every message as one
// file; this side starts it, parses what arrived and waits for mail.
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort, sleep } from './harness.mjs';

const SINK = new URL('./smtp_sink.py', import.meta.url).pathname;
// Debian's interpreter: python3-aiosmtpd is installed for it, and the
// python3 first on PATH may be another one.
const PYTHON = process.env.AAS_PYTHON || '/usr/bin/python3';

// Sinks still running (process -> dir); killed and their directories
// removed if the test process exits without stop().
const live = new Map();
process.on('exit', () => {
  for (const [proc, dir] of live) {
    try { proc.kill('SIGKILL'); } catch { /* already gone */ }
    try { rmSync(dir, { recursive: true, force: true }); } catch { /* best effort */ }
  }
});

// Starts a sink on a free port. Returns
//   url         'smtp://127.0.0.1:PORT'
//   host, port
//   dir         where the messages are kept, one NNNNNN.eml file each
//   messages()  every message so far, in arrival order, parsed (see parseMessage)
//   waitFor(to, { subject, timeoutMs = 20000, since = 0 })
//               the first message (from index `since` on) addressed to `to`
//               whose subject contains `subject`; throws listing what arrived
//   stop()      ends the sink, waits for its exit, removes dir
export async function startSmtpSink() {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'aas-test-smtp-'));
  let lastError;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    try {
      return await startOn(port, dir);
    } catch (e) {
      lastError = e; // most likely the port was taken meanwhile
    }
  }
  await rm(dir, { recursive: true, force: true });
  throw lastError;
}

async function startOn(port, dir) {
  // stdin is a pipe the sink reads until end of file: it ends with us.
  const proc = spawn(PYTHON, [SINK, String(port), dir], { stdio: ['pipe', 'pipe', 'pipe'] });
  live.set(proc, dir);
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  proc.stdin.on('error', () => { /* the sink already exited */ });
  let gone = false;
  const exited = new Promise((resolve) => {
    proc.on('exit', (code, sig) => { gone = true; resolve({ code, sig }); });
    // Never started (no such interpreter): there is no exit to wait for.
    proc.on('error', (e) => { log += `spawn ${PYTHON}: ${e.message}\n`; gone = true; resolve({ code: null, sig: null }); });
  });

  const deadline = Date.now() + 15000;
  for (;;) {
    if (gone) {
      live.delete(proc);
      throw new Error(`SMTP sink exited early (${proc.exitCode ?? proc.signalCode}):\n${log}`);
    }
    if (await greets(port)) break;
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      await exited;
      live.delete(proc);
      throw new Error(`SMTP sink did not start on 127.0.0.1:${port}:\n${log}`);
    }
    await sleep(50);
  }

  async function messages() {
    let names;
    try {
      names = (await readdir(dir)).filter((n) => n.endsWith('.eml')).sort();
    } catch {
      return [];
    }
    const out = [];
    for (const name of names) {
      const raw = await readFile(path.join(dir, name));
      out.push({ file: path.join(dir, name), ...parseMessage(raw) });
    }
    return out;
  }

  async function waitFor(to, { subject, timeoutMs = 20000, since = 0 } = {}) {
    const want = String(to).toLowerCase();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const all = await messages();
      const hit = all.slice(since).find((m) => m.to.includes(want)
        && (subject === undefined || m.subject.includes(subject)));
      if (hit) return hit;
      if (Date.now() > deadline) {
        const seen = all.map((m, i) => `  #${i} to ${m.to.join(', ')}: ${JSON.stringify(m.subject)}`);
        throw new Error(`no mail to ${to}${subject === undefined ? '' : ` with subject containing ${JSON.stringify(subject)}`}`
          + `${since ? ` from #${since} on` : ''} within ${timeoutMs} ms; `
          + `${seen.length ? `arrived:\n${seen.join('\n')}` : 'nothing arrived'}`
          + `${log ? `\nsink output:\n${log}` : ''}`);
      }
      await sleep(100);
    }
  }

  async function stop() {
    if (!gone) {
      proc.stdin.end();
      proc.kill('SIGTERM');
      const res = await Promise.race([exited, sleep(5000).then(() => null)]);
      if (!res) proc.kill('SIGKILL');
    }
    await exited;
    await rm(dir, { recursive: true, force: true });
    live.delete(proc);
  }

  return {
    url: `smtp://127.0.0.1:${port}`, host: '127.0.0.1', port, dir, proc,
    log: () => log, messages, waitFor, stop,
  };
}

// True when an SMTP server answers with its 220 greeting on the port.
function greets(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let buf = '';
    const done = (ok) => { clearTimeout(timer); sock.destroy(); resolve(ok); };
    const timer = setTimeout(() => done(false), 2000);
    sock.on('error', () => done(false));
    sock.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) {
        const ok = buf.startsWith('220');
        if (ok) sock.write('QUIT\r\n');
        done(ok);
      }
    });
  });
}

// --- a small MIME reader: enough for the mail a web application sends ---

// Parses one raw message (Buffer or string) into
//   { from, to, subject, text, html, links, headers, raw }
// from: the From header, decoded; to: every recipient address, lower
// case (the SMTP envelope, To and Cc); subject: decoded (RFC 2047);
// text: the first text/plain part (a message that has none: its
// text/html part with the tags taken out), transfer encoding and charset
// undone, lines ending in \n; html: the first text/html part or '';
// links: each distinct http(s) URL in text, in order; headers: the top
// level headers, names in lower case, a list of values each.
export function parseMessage(raw) {
  const buf = Buffer.isBuffer(raw) ? raw : Buffer.from(raw, 'utf8');
  const { headers, body } = splitEntity(buf);
  const first = (name) => (headers[name] ? headers[name][0] : '');
  const to = new Set();
  for (const h of ['x-envelope-to', 'to', 'cc']) {
    for (const v of headers[h] || []) {
      for (const a of addresses(decodeWords(v))) to.add(a);
    }
  }
  const parts = { text: null, html: null };
  collectParts(headers, body, parts);
  let text = parts.text;
  if (text === null) text = parts.html === null ? '' : htmlToText(parts.html);
  return {
    from: decodeWords(first('from')),
    to: [...to],
    subject: decodeWords(first('subject')),
    text,
    html: parts.html ?? '',
    links: findLinks(text),
    headers,
    raw: buf.toString('utf8'),
  };
}

// Headers (unfolded, latin1-decoded so bytes survive) and body bytes.
function splitEntity(buf) {
  const s = buf.toString('latin1');
  const m = /\r?\n\r?\n/.exec(s);
  const headText = m ? s.slice(0, m.index) : s;
  const bodyStart = m ? m.index + m[0].length : s.length;
  const headers = {};
  for (const line of headText.replace(/\r?\n(?=[ \t])/g, '').split(/\r?\n/)) {
    const c = line.indexOf(':');
    if (c <= 0) continue;
    const name = line.slice(0, c).trim().toLowerCase();
    // Header bytes are UTF-8 when they are not ASCII (RFC 6532).
    const value = Buffer.from(line.slice(c + 1).trim(), 'latin1').toString('utf8');
    (headers[name] ||= []).push(value);
  }
  // latin1 maps byte to character one to one: the offset is the same.
  return { headers, body: buf.subarray(bodyStart) };
}

// Content-Type and the like: the value and its parameters.
function parseParams(value) {
  const [type, ...rest] = splitUnquoted(value || '', ';');
  const params = {};
  for (const p of rest) {
    const eq = p.indexOf('=');
    if (eq < 0) continue;
    let v = p.slice(eq + 1).trim();
    if (v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1).replace(/\\(.)/g, '$1');
    params[p.slice(0, eq).trim().toLowerCase()] = v;
  }
  return { type: type.trim().toLowerCase(), params };
}

function splitUnquoted(s, sep) {
  const out = [];
  let cur = '';
  let q = false;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    if (ch === '\\' && q) { cur += ch + (s[i + 1] ?? ''); i++; continue; }
    if (ch === '"') q = !q;
    if (ch === sep && !q) { out.push(cur); cur = ''; continue; }
    cur += ch;
  }
  out.push(cur);
  return out;
}

function collectParts(headers, body, parts) {
  const ct = parseParams(headers['content-type']?.[0] || 'text/plain; charset=us-ascii');
  if (ct.type.startsWith('multipart/') && ct.params.boundary) {
    for (const part of splitMultipart(body, ct.params.boundary)) {
      const e = splitEntity(part);
      collectParts(e.headers, e.body, parts);
    }
    return;
  }
  if (ct.type === 'message/rfc822') return;
  const disp = parseParams(headers['content-disposition']?.[0] || '');
  if (disp.type === 'attachment') return;
  const cte = (headers['content-transfer-encoding']?.[0] || '7bit').trim().toLowerCase();
  if (ct.type === 'text/plain' && parts.text === null) {
    parts.text = decodeBody(body, cte, ct.params.charset);
  } else if (ct.type === 'text/html' && parts.html === null) {
    parts.html = decodeBody(body, cte, ct.params.charset);
  }
}

function splitMultipart(body, boundary) {
  const s = body.toString('latin1');
  const esc = boundary.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // A delimiter is a line of its own: --boundary, or --boundary-- at the
  // end; the line break before it belongs to it (RFC 2046 5.1.1).
  const re = new RegExp(`(?:^|\\r?\\n)--${esc}(--)?[ \\t]*(?:\\r?\\n|$)`, 'g');
  const out = [];
  let start = -1;
  for (const m of s.matchAll(re)) {
    if (start >= 0) out.push(Buffer.from(s.slice(start, m.index), 'latin1'));
    if (m[1]) return out;
    start = m.index + m[0].length;
  }
  if (start >= 0) out.push(Buffer.from(s.slice(start), 'latin1')); // no closing delimiter
  return out;
}

function decodeBody(body, cte, charset) {
  let bytes;
  if (cte === 'base64') {
    bytes = Buffer.from(body.toString('latin1').replace(/[^A-Za-z0-9+/=]/g, ''), 'base64');
  } else if (cte === 'quoted-printable') {
    bytes = decodeQP(body.toString('latin1'));
  } else {
    bytes = body;
  }
  return decodeCharset(bytes, charset).replace(/\r\n/g, '\n');
}

function decodeQP(s) {
  // Soft line breaks first, then =XX escapes (trailing blanks before a
  // line end are padding, RFC 2045 6.7).
  const t = s.replace(/[ \t]+(?=\r?\n)/g, '').replace(/=\r?\n/g, '');
  const out = [];
  for (let i = 0; i < t.length; i++) {
    if (t[i] === '=' && /^[0-9A-Fa-f]{2}$/.test(t.slice(i + 1, i + 3))) {
      out.push(parseInt(t.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      out.push(t.charCodeAt(i) & 0xff);
    }
  }
  return Buffer.from(out);
}

function decodeCharset(bytes, charset) {
  const cs = (charset || 'utf-8').trim().toLowerCase();
  try {
    return new TextDecoder(cs === 'us-ascii' ? 'utf-8' : cs).decode(bytes);
  } catch {
    return new TextDecoder('utf-8').decode(bytes);
  }
}

// RFC 2047 encoded words (=?charset?B|Q?...?=); blanks between two of
// them are dropped.
function decodeWords(s) {
  return s.replace(/(=\?[^?\s]+\?[BbQq]\?[^?\s]*\?=)\s+(?==\?)/g, '$1')
    .replace(/=\?([^?\s]+)\?([BbQq])\?([^?\s]*)\?=/g, (_, cs, enc, data) => {
      const charset = cs.split('*')[0];
      const bytes = enc.toUpperCase() === 'B'
        ? Buffer.from(data, 'base64')
        : decodeQP(data.replace(/_/g, ' '));
      return decodeCharset(bytes, charset);
    });
}

// The addresses in an address list header, lower case.
function addresses(value) {
  const out = [];
  for (const item of splitUnquoted(value, ',')) {
    const angle = /<([^<>]*)>/.exec(item);
    const a = (angle ? angle[1] : item.replace(/\([^)]*\)/g, '')).trim().toLowerCase();
    if (a.includes('@')) out.push(a);
  }
  return out;
}

function htmlToText(html) {
  return html.replace(/<(script|style)[^]*?<\/\1>/gi, '')
    .replace(/<a\s[^>]*href="([^"]*)"[^>]*>/gi, ' $1 ')
    .replace(/<br\s*\/?>|<\/p>|<\/div>|<\/li>|<\/tr>/gi, '\n')
    .replace(/<[^>]*>/g, '')
    .replace(/&amp;/g, '&').replace(/&lt;/g, '<').replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"').replace(/&#39;/g, "'");
}

function findLinks(text) {
  const out = [];
  for (const m of text.matchAll(/https?:\/\/[^\s<>"'`]+/g)) {
    // Sentence punctuation after a URL is not part of it.
    let url = m[0].replace(/[.,;:!?]+$/, '');
    if (url.endsWith(')') && !url.includes('(')) url = url.replace(/\)+$/, '');
    if (url.endsWith(']') && !url.includes('[')) url = url.replace(/\]+$/, '');
    if (!out.includes(url)) out.push(url);
  }
  return out;
}
