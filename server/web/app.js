// The dashboard's only script: copy buttons. Pages work without it.
'use strict';
document.addEventListener('click', (ev) => {
  const btn = ev.target.closest('button[data-copy]');
  if (!btn) return;
  const src = document.getElementById(btn.dataset.copy);
  if (!src) return;
  const status = document.getElementById(btn.dataset.copy + '-status');
  const done = (msg) => { if (status) status.textContent = msg; };
  const text = src.textContent;
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(() => done('Copied.'), () => done('Select the text and copy it.'));
  } else {
    const range = document.createRange();
    range.selectNodeContents(src);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    done(document.execCommand('copy') ? 'Copied.' : 'Selected: press Ctrl+C to copy.');
  }
});

// The terminal page: a plain-text view of a sandbox's terminal over the
// WebSocket the page's single-use ticket opens. Escape sequences are
// dropped (no full-screen programs); lines typed are sent with Enter.
(() => {
  const box = document.getElementById('terminal');
  if (!box) return;
  const out = document.getElementById('term-out');
  const status = document.getElementById('term-status');
  const form = document.getElementById('term-form');
  const input = document.getElementById('term-in');
  const MAX = 200000;
  const url = new URL(box.dataset.ws, window.location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(url.href);
  ws.binaryType = 'arraybuffer';
  const dec = new TextDecoder();
  // CSI and OSC sequences, other two-byte escapes, and control bytes but \n.
  const strip = (s) => s.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, '')
    .replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, '')
    .replace(/\x1b[@-_]/g, '')
    .replace(/\r\n/g, '\n')
    .replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '');
  ws.onopen = () => { status.textContent = 'Connected.'; input.focus(); };
  ws.onmessage = (ev) => {
    const text = typeof ev.data === 'string' ? ev.data : dec.decode(ev.data, { stream: true });
    out.textContent = (out.textContent + strip(text)).slice(-MAX);
    out.scrollTop = out.scrollHeight;
  };
  ws.onclose = (ev) => { status.textContent = `Closed${ev.reason ? `: ${ev.reason}` : ''}.`; };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (ws.readyState === WebSocket.OPEN) ws.send(`${input.value}\r`);
    input.value = '';
  });
  document.getElementById('term-intr').addEventListener('click', () => {
    if (ws.readyState === WebSocket.OPEN) ws.send('\x03');
    input.focus();
  });
})();
