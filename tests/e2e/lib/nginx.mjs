// nginx in front of aasd as deploy/nginx/ installs it: a test CA and one
// certificate for the API host and the preview wildcard, the site
// deploy/nginx/aas.conf with only its names, certificate paths, listen
// ports and upstream port replaced, and deploy/nginx/aas-proxy.conf
// included from where it is, unchanged. Clients reach it on 127.0.0.1
// with the name as SNI and Host, trusting the test CA (tlsFetch).
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { ROOT, sleep } from './harness.mjs';

const START_MS = 10000;

// A CA and a certificate for `names` (SAN entries) signed by it, in dir.
// Returns { ca, cert, key } (paths) and caPem (the CA's text, for clients).
export function makeCerts(dir, names) {
  mkdirSync(dir, { recursive: true });
  const f = (n) => path.join(dir, n);
  const ossl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  ossl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=aas test CA',
    '-keyout', f('ca.key'), '-out', f('ca.pem'));
  ossl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${names[0]}`,
    '-keyout', f('privkey.pem'), '-out', f('site.csr'));
  writeFileSync(f('san.ext'), `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\n`);
  ossl('x509', '-req', '-in', f('site.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'),
    '-CAcreateserial', '-days', '2', '-extfile', f('san.ext'), '-out', f('fullchain.pem'));
  return { ca: f('ca.pem'), cert: f('fullchain.pem'), key: f('privkey.pem'), caPem: readFileSync(f('ca.pem')) };
}

// Each replacement must match: a deploy file that changed shape fails
// here rather than being tested half-substituted.
function replaceAll(text, re, to, what) {
  const out = text.replace(re, to);
  if (out === text) throw new Error(`nginx site: no ${what} in deploy/nginx/aas.conf`);
  return out;
}

// The site for `api` and `*.preview`, listening on 127.0.0.1:port (TLS)
// and httpPort (plain), proxying to aasd on upstreamPort; and a main
// configuration around it with everything nginx writes under dir.
// Returns the main configuration's path.
export function writeNginxConf(dir, { api, preview, port, httpPort, upstreamPort, certs }) {
  mkdirSync(path.join(dir, 'tmp'), { recursive: true });
  mkdirSync(path.join(dir, 'acme'), { recursive: true });
  let site = readFileSync(path.join(ROOT, 'deploy/nginx/aas.conf'), 'utf8');
  site = replaceAll(site, /api\.example\.com/g, api, 'API host');
  site = replaceAll(site, /preview\.example\.com/g, preview, 'preview domain');
  site = replaceAll(site, /\/etc\/letsencrypt\/live\/[^/]+\/fullchain\.pem/g, certs.cert, 'certificate');
  site = replaceAll(site, /\/etc\/letsencrypt\/live\/[^/]+\/privkey\.pem/g, certs.key, 'certificate key');
  site = replaceAll(site, /listen 443 /g, `listen 127.0.0.1:${port} `, 'TLS listener');
  site = replaceAll(site, /listen 80;/g, `listen 127.0.0.1:${httpPort};`, 'plain listener');
  // No IPv6 listeners: the test's ports are free on 127.0.0.1 only.
  site = replaceAll(site, /^\s*listen \[::\]:\d+[^;]*;\n/gm, '', 'IPv6 listener');
  site = replaceAll(site, /server 127\.0\.0\.1:8080;/g, `server 127.0.0.1:${upstreamPort};`, 'upstream');
  site = replaceAll(site, /include \/etc\/nginx\/snippets\/aas-proxy\.conf;/g,
    `include ${path.join(ROOT, 'deploy/nginx/aas-proxy.conf')};`, 'proxy snippet');
  site = replaceAll(site, /root \/var\/www\/letsencrypt;/g, `root ${path.join(dir, 'acme')};`, 'ACME root');
  writeFileSync(path.join(dir, 'aas.conf'), site);
  const t = (n) => path.join(dir, 'tmp', n);
  const main = [
    'daemon off;', 'user root;', 'worker_processes 1;', `pid ${path.join(dir, 'nginx.pid')};`,
    `error_log ${path.join(dir, 'error.log')} info;`,
    'events { worker_connections 512; }',
    'http {',
    `  access_log ${path.join(dir, 'access.log')};`,
    `  client_body_temp_path ${t('body')};`, `  proxy_temp_path ${t('proxy')};`,
    `  fastcgi_temp_path ${t('fastcgi')};`, `  uwsgi_temp_path ${t('uwsgi')};`, `  scgi_temp_path ${t('scgi')};`,
    `  include ${path.join(dir, 'aas.conf')};`,
    '}', ''].join('\n');
  const conf = path.join(dir, 'nginx.conf');
  writeFileSync(conf, main);
  return conf;
}

function canConnect(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1', () => { c.end(); resolve(true); });
    c.on('error', () => resolve(false));
  });
}

// Starts nginx on conf and waits for its TLS port. Returns { proc, log(), stop() }.
export async function startNginx(conf, port) {
  const dir = path.dirname(conf);
  execFileSync('nginx', ['-t', '-q', '-e', path.join(dir, 'error.log'), '-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  const proc = spawn('nginx', ['-e', path.join(dir, 'error.log'), '-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  const exited = new Promise((r) => proc.on('exit', r));
  // A test process that ends without stop() takes nginx with it.
  const onExit = () => { try { proc.kill('SIGTERM'); } catch { /* gone */ } };
  process.on('exit', onExit);
  exited.then(() => process.off('exit', onExit));
  const deadline = Date.now() + START_MS;
  while (!await canConnect(port)) {
    if (proc.exitCode !== null) throw new Error(`nginx exited:\n${log}`);
    if (Date.now() > deadline) { proc.kill('SIGKILL'); throw new Error(`nginx did not start:\n${log}`); }
    await sleep(50);
  }
  return {
    proc,
    log: () => log + readFileSync(path.join(dir, 'error.log'), 'utf8').slice(-4000),
    async stop() {
      // SIGTERM: a fast shutdown, the workers go with the master.
      if (proc.exitCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
}

// A fetch (url, init) -> Response that connects to 127.0.0.1:port whatever
// the URL's host, sends the URL's host as SNI and Host, and trusts caPem.
// Redirects are never followed (as redirect: 'manual').
export function tlsFetch(port, caPem) {
  const agent = new https.Agent({ ca: caPem, keepAlive: true });
  return (url, init = {}) => new Promise((resolve, reject) => {
    const u = new URL(url);
    const headers = { ...(init.headers || {}) };
    const req = https.request({
      agent,
      host: '127.0.0.1',
      port,
      servername: u.hostname,
      method: init.method || 'GET',
      path: u.pathname + u.search,
      headers: { host: u.host, ...headers },
    }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('error', reject);
      res.on('end', () => {
        const h = new Headers();
        for (let i = 0; i < res.rawHeaders.length; i += 2) h.append(res.rawHeaders[i], res.rawHeaders[i + 1]);
        const body = [101, 204, 205, 304].includes(res.statusCode) ? null : Buffer.concat(chunks);
        const status = res.statusCode === 101 ? 200 : res.statusCode;
        resolve(new Response(body, { status, statusText: res.statusMessage, headers: h }));
      });
    });
    req.on('error', reject);
    if (init.body !== undefined && init.body !== null) req.write(init.body);
    req.end();
  });
}
