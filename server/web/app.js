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
