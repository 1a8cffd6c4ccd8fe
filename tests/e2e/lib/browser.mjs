// Headless Chromium (Debian's package) through puppeteer-core for the
// dashboard's browser tests: launch and reliable teardown, screenshots,
// axe-core accessibility checks, filling and submitting plain HTML forms.
import {
  mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { ROOT, STATE } from './harness.mjs';

export const CHROMIUM = process.env.AAS_CHROMIUM || '/usr/bin/chromium';
// Each browser's profile is a new directory PROFILE_DIR/aas-test-chromium-*
// (under the state directory, so a run's browsers are told from any
// other's). tests/run.sh counts a process whose command line names such a
// directory after the tests as a leak: keep the two in step.
export const PROFILE_DIR = path.join(path.resolve(STATE), 'browser');
export const PROFILE_PREFIX = 'aas-test-chromium-';
const AXE = path.join(ROOT, 'node_modules/axe-core/axe.min.js');

// Flags beyond puppeteer's defaults (which already turn off background
// networking, sync, default apps, first run, crash reporting and metrics
// upload, and extensions).
const ARGS = [
  // Root in a container: no user namespaces for the sandbox, a small
  // /dev/shm, no GPU.
  '--no-sandbox',
  '--disable-dev-shm-usage',
  '--disable-gpu',
  // Nothing but what a page asks for, and that only on loopback: every
  // request for another address goes to a proxy on 127.0.0.1 that does
  // not exist and fails there (loopback itself never goes through a
  // proxy), and host names other than localhost do not resolve.
  '--proxy-server=http://127.0.0.1:9',
  '--proxy-bypass-list=localhost;127.0.0.1;[::1]',
  '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1',
  // Google account sign-in asks accounts.google.com for the signed-in
  // accounts as soon as the machine looks online (Debian's build has an
  // OAuth client): that goes to the same dead end, directly.
  '--gaia-url=http://127.0.0.1:9',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-domain-reliability',
  '--disable-sync',
  '--disable-default-apps',
  '--no-first-run',
  '--no-default-browser-check',
  '--disable-crash-reporter',
  '--disable-breakpad',
  '--metrics-recording-only',
  '--no-pings',
  '--no-service-autorun',
  '--safebrowsing-disable-auto-update',
  '--disable-client-side-phishing-detection',
  '--dns-prefetch-disable',
  '--disable-features=AutofillServerCommunication,CertificateTransparencyComponentUpdater,'
    + 'OptimizationHints,OptimizationGuideModelDownloading,MediaRouter,DialMediaRouteProvider,'
    + 'Translate,InterestFeedContentSuggestions,NetworkTimeServiceQuerying,'
    + 'SafeBrowsingEnhancedProtection,PrivacySandboxSettings4',
  '--lang=en-US',
  '--window-size=1280,900',
];

// The new profile's preferences: no password manager (its leak check
// sends a submitted password form's credentials' hash to Google), no
// translation or spelling service, no search suggestions.
const PREFS = {
  credentials_enable_service: false,
  credentials_enable_autosignin: false,
  profile: { password_manager_enabled: false, password_manager_leak_detection: false },
  translate: { enabled: false },
  spellcheck: { use_spelling_service: false },
  search: { suggest_enabled: false },
  safebrowsing: { enabled: false },
  autofill: { profile_enabled: false, credit_card_enabled: false },
  signin: { allowed: false, allowed_on_next_startup: false },
};

// Browsers not yet closed: killed with their process group if the test
// process exits first (a failed test, --test-force-exit).
const live = new Map(); // browser -> { pid, profile }
process.on('exit', () => {
  for (const { pid, profile } of live.values()) {
    killBrowser(pid, profile);
    removeProfile(profile);
  }
});

// Removes a profile and the directory in TMPDIR holding its singleton
// socket (the profile's SingletonSocket links there), which a browser
// that was killed leaves behind.
function removeProfile(profile) {
  try {
    const sock = readlinkSync(path.join(profile, 'SingletonSocket'));
    const dir = path.dirname(sock);
    if (/^org\.chromium\.Chromium\.\w+$/.test(path.basename(dir))) {
      rmSync(dir, { recursive: true, force: true });
    }
  } catch { /* none */ }
  try { rmSync(profile, { recursive: true, force: true }); } catch { /* best effort */ }
}

// SIGKILL for the browser's process group (puppeteer starts it as a group
// leader) and for every process naming its profile: the crash handler
// leaves the group.
function killBrowser(pid, profile) {
  if (pid) {
    try { process.kill(-pid, 'SIGKILL'); } catch { /* gone */ }
    try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  }
  if (!profile) return;
  let pids = [];
  try { pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d)); } catch { return; }
  for (const p of pids) {
    try {
      if (readFileSync(`/proc/${p}/cmdline`, 'latin1').includes(profile)) process.kill(+p, 'SIGKILL');
    } catch { /* gone meanwhile */ }
  }
}

// A headless Chromium with a fresh profile in a temp directory (removed
// by closeBrowser). options are passed on to puppeteer.launch.
export async function launchBrowser(options = {}) {
  const { args: extraArgs = [], ...rest } = options;
  mkdirSync(PROFILE_DIR, { recursive: true });
  const profile = mkdtempSync(path.join(PROFILE_DIR, PROFILE_PREFIX));
  let browser;
  try {
    mkdirSync(path.join(profile, 'Default'));
    writeFileSync(path.join(profile, 'Default', 'Preferences'), JSON.stringify(PREFS));
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      userDataDir: profile,
      args: [...ARGS,
        // The on-device model manifest is fetched through the component
        // updater even with --disable-component-update; a local manifest
        // directory (none there) takes its place.
        `--optimization-guide-manifest-override=${path.join(profile, 'no-model-manifest')}`,
        ...extraArgs],
      // DevTools over a pipe, not a port: the browser also ends when the
      // test process dies and the pipe closes.
      pipe: true,
      // The browser's environment: no proxy settings from ours; the
      // profile's directory as HOME, so what it keeps there goes with it.
      env: {
        PATH: process.env.PATH, HOME: profile, TMPDIR: os.tmpdir(), LANG: 'C.UTF-8', TZ: 'UTC',
      },
      timeout: 60000,
      protocolTimeout: 60000,
      defaultViewport: { width: 1280, height: 900 },
      ...rest,
    });
  } catch (e) {
    removeProfile(profile);
    throw e;
  }
  live.set(browser, { pid: browser.process()?.pid, profile });
  return browser;
}

// Closes the browser; when that takes more than timeoutMs, kills its
// process group. Always removes the profile directory.
export async function closeBrowser(browser, { timeoutMs = 10000 } = {}) {
  if (!browser) return;
  const entry = live.get(browser);
  const proc = browser.process();
  const exited = proc && proc.exitCode === null && proc.signalCode === null
    ? new Promise((resolve) => proc.once('exit', resolve)) : Promise.resolve();
  let timer;
  const closed = await Promise.race([
    browser.close().then(() => true, () => false),
    new Promise((resolve) => { timer = setTimeout(() => resolve(false), timeoutMs); }),
  ]);
  clearTimeout(timer);
  if (!closed) killBrowser(entry?.pid ?? proc?.pid, entry?.profile);
  await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
  // Whatever outlived the browser (a renderer, the crash handler).
  killBrowser(entry?.pid, entry?.profile);
  live.delete(browser);
  if (entry) removeProfile(entry.profile);
}

// A full-page PNG at STATE/log/screens/<name>.png; returns its path.
export async function screenshot(page, name) {
  const dir = path.join(STATE, 'log', 'screens');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name.replace(/[^A-Za-z0-9._-]/g, '_')}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

let axeSource;

// Runs axe-core on the page as it is now; returns the serious and
// critical violations as [{ id, impact, help, nodes: [selector, ...] }].
// axe is evaluated through the DevTools protocol, which the page's
// Content-Security-Policy does not govern, so it works on pages that
// allow no inline or foreign script (without turning their CSP off).
// options go to axe.run (e.g. { runOnly: ['wcag2a', 'wcag2aa'] }).
export async function checkA11y(page, options = {}) {
  axeSource ??= readFileSync(AXE, 'utf8');
  const loaded = await page.evaluate('typeof window.axe === "object"');
  if (!loaded) {
    await page.evaluate(axeSource);
    if (!await page.evaluate('typeof window.axe === "object"')) {
      throw new Error('axe-core did not load into the page');
    }
  }
  const violations = await page.evaluate(async (opts) => {
    // eslint-disable-next-line no-undef
    const res = await axe.run(document, opts);
    return res.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => n.target.map((t) => (Array.isArray(t) ? t.join(' ') : t)).join(' >> ')),
    }));
  }, options);
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

// Types values into the form fields named in fields ({ name: value }),
// each cleared first. A <select> gets its option chosen; a checkbox or
// radio button is set to the boolean given (a radio: the one whose value
// is given as a string).
export async function formFill(page, fields) {
  for (const [name, value] of Object.entries(fields)) {
    const sel = `[name=${JSON.stringify(name)}]`;
    const els = await page.$$(sel);
    if (els.length === 0) throw new Error(`no form field named ${name} on ${page.url()}`);
    const el = els[0];
    const { tag, type } = await el.evaluate((e) => ({
      tag: e.tagName.toLowerCase(), type: (e.getAttribute('type') || '').toLowerCase(),
    }));
    if (tag === 'select') {
      await page.select(sel, String(value));
    } else if (type === 'radio') {
      const want = typeof value === 'string' ? `${sel}[value=${JSON.stringify(value)}]` : sel;
      await page.click(want);
    } else if (type === 'checkbox') {
      const checked = await el.evaluate((e) => e.checked);
      if (checked !== Boolean(value)) await el.click();
    } else {
      await el.evaluate((e) => {
        e.value = '';
        e.dispatchEvent(new Event('input', { bubbles: true }));
      });
      await el.type(String(value));
    }
  }
}

// Clicks selector and waits for the navigation that follows (a form
// submission or a link); returns the navigation's response.
export async function clickAndWait(page, selector, { timeoutMs = 20000 } = {}) {
  const [response] = await Promise.all([
    page.waitForNavigation({ waitUntil: 'load', timeout: timeoutMs }),
    page.click(selector),
  ]);
  return response;
}
