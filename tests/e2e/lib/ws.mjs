// A minimal WebSocket client (RFC 6455 handshake, one masked text frame
// out, one frame back) over a raw TCP connection, so a test controls the
// Host header and needs no library. Node 20 has no WebSocket client.
import net from 'node:net';
import tls from 'node:tls';
import { createHash, randomBytes } from 'node:crypto';

// Connects to 127.0.0.1:port with `host` as the Host header, sends `text`
// and resolves with { status, accept, echo }.
export function wsEcho(port, host, path, text, timeoutMs = 20000) {
  return new Promise((resolve, reject) => {
    const key = randomBytes(16).toString('base64');
    const want = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    const sock = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let head = null;
    const timer = setTimeout(() => { sock.destroy(); reject(new Error('websocket timeout')); }, timeoutMs);
    sock.on('error', (e) => { clearTimeout(timer); reject(e); });
    sock.on('connect', () => {
      sock.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\n` +
        `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    });
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (head === null) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        head = buf.subarray(0, end).toString();
        buf = buf.subarray(end + 4);
        const status = Number(head.split(' ')[1]);
        if (status !== 101) {
          clearTimeout(timer);
          sock.destroy();
          resolve({ status, accept: null, echo: null, head });
          return;
        }
        const payload = Buffer.from(text);
        const mask = randomBytes(4);
        const frame = Buffer.concat([
          Buffer.from([0x81, 0x80 | payload.length]), mask,
          Buffer.from(payload.map((b, i) => b ^ mask[i % 4])),
        ]);
        sock.write(frame);
      }
      if (buf.length >= 2) {
        const len = buf[1] & 0x7f;
        if (buf.length < 2 + len) return;
        const echo = buf.subarray(2, 2 + len).toString();
        const accept = /sec-websocket-accept:\s*(\S+)/i.exec(head)?.[1];
        clearTimeout(timer);
        sock.destroy();
        resolve({ status: 101, accept, want, echo, head });
      }
    });
  });
}

// The guest side: a stdlib-only Python echo server (text frames < 126
// bytes, which is all the test sends).
export const WS_ECHO_SERVER = `
import base64, hashlib, socket, threading
G = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
def serve(c):
    data = b""
    while b"\\r\\n\\r\\n" not in data:
        data += c.recv(4096)
    key = [l.split(b":", 1)[1].strip() for l in data.split(b"\\r\\n") if l.lower().startswith(b"sec-websocket-key")][0]
    acc = base64.b64encode(hashlib.sha1(key + G).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: " + acc + b"\\r\\n\\r\\n")
    while True:
        h = c.recv(2)
        if len(h) < 2:
            return
        n = h[1] & 0x7f
        mask = c.recv(4)
        p = b""
        while len(p) < n:
            p += c.recv(n - len(p))
        p = bytes(b ^ mask[i % 4] for i, b in enumerate(p))
        c.sendall(bytes([0x81, len(p)]) + p)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 9000))
s.listen(8)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`;

// A WebSocket session over raw TCP (any frame size, masked client frames,
// fragments joined): wsConnect resolves with { status, head, body } when
// the upgrade is refused, or { status: 101, accept, want, ws } where ws
// has send(data) (a Buffer goes as binary, a string as text),
// sendFrame(opcode, payload, fin), close(code, reason), `output` (every
// binary and text message received, as one string), waitFor(re, ms)
// and `closed`, a promise of { code, reason } when the server closes
// (code 1006 when the connection drops without a close frame).
// `tls` (options of tls.connect: ca, servername) makes it wss, and `host`
// replaces the Host header (a name nginx serves).
export function wsConnect(port, path, headers = {}, timeoutMs = 60000,
  { tls: tlsOpts = null, host = `127.0.0.1:${port}` } = {}) {
  return new Promise((resolve, reject) => {
    const key = randomBytes(16).toString('base64');
    const want = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    const sock = tlsOpts ? tls.connect({ port, host: '127.0.0.1', ...tlsOpts }) : net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let head = null;
    let frag = [];
    let closeFrame = null;
    let closedResolve;
    const closed = new Promise((r) => { closedResolve = r; });
    const waiters = [];
    const ws = {
      output: '',
      closed,
      sendFrame(op, payload, fin = true) {
        const p = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
        const mask = randomBytes(4);
        let hdr;
        if (p.length < 126) hdr = Buffer.from([(fin ? 0x80 : 0) | op, 0x80 | p.length]);
        else if (p.length < 65536) {
          hdr = Buffer.from([(fin ? 0x80 : 0) | op, 0x80 | 126, p.length >> 8, p.length & 255]);
        } else {
          hdr = Buffer.alloc(10);
          hdr[0] = (fin ? 0x80 : 0) | op;
          hdr[1] = 0x80 | 127;
          hdr.writeBigUInt64BE(BigInt(p.length), 2);
        }
        sock.write(Buffer.concat([hdr, mask, Buffer.from(p.map((b, i) => b ^ mask[i % 4]))]));
      },
      send(data) { ws.sendFrame(Buffer.isBuffer(data) ? 2 : 1, data); },
      close(code = 1000, reason = '') {
        const p = Buffer.concat([Buffer.from([code >> 8, code & 255]), Buffer.from(reason)]);
        ws.sendFrame(8, p);
      },
      waitFor(re, ms = 30000) {
        return new Promise((res, rej) => {
          const w = { re, res, timer: null };
          w.timer = setTimeout(() => {
            waiters.splice(waiters.indexOf(w), 1);
            rej(new Error(`no ${re} in terminal output within ${ms} ms:\n${ws.output.slice(-2000)}`));
          }, ms);
          waiters.push(w);
          check();
        });
      },
      destroy() { sock.destroy(); },
    };
    function check() {
      for (const w of [...waiters]) {
        const m = w.re.exec(ws.output);
        if (m) {
          clearTimeout(w.timer);
          waiters.splice(waiters.indexOf(w), 1);
          w.res(m);
        }
      }
    }
    function frames() {
      for (;;) {
        if (buf.length < 2) return;
        const fin = (buf[0] & 0x80) !== 0;
        const op = buf[0] & 0x0f;
        assert101(!(buf[1] & 0x80), 'server frames are never masked');
        let len = buf[1] & 0x7f;
        let at = 2;
        if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); at = 4; }
        if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); at = 10; }
        if (buf.length < at + len) return;
        const payload = buf.subarray(at, at + len);
        buf = buf.subarray(at + len);
        if (op === 8) {
          closeFrame = payload.length >= 2 ?
            { code: payload.readUInt16BE(0), reason: payload.subarray(2).toString() } :
            { code: 1005, reason: '' };
        } else if (op === 9) {
          ws.sendFrame(10, payload);
        } else if (op === 0 || op === 1 || op === 2) {
          frag.push(payload);
          if (fin) {
            ws.output += Buffer.concat(frag).toString('latin1');
            frag = [];
            check();
          }
        }
      }
    }
    function assert101(ok, what) { if (!ok) { sock.destroy(); throw new Error(what); } }
    const timer = setTimeout(() => { sock.destroy(); reject(new Error('websocket timeout')); }, timeoutMs);
    sock.on('error', (e) => { clearTimeout(timer); if (head === null) reject(e); });
    sock.on('close', () => { closedResolve(closeFrame || { code: 1006, reason: '' }); });
    sock.on(tlsOpts ? 'secureConnect' : 'connect', () => {
      const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
      sock.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\n` +
        `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`);
    });
    let refused = null;
    function refusedDone() {
      const cl = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < cl) return;
      sock.destroy();
      let body = null;
      try { body = JSON.parse(buf.toString()); } catch { /* not JSON */ }
      resolve({ status: refused, head, body });
    }
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (refused !== null) { refusedDone(); return; }
      if (head === null) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        head = buf.subarray(0, end).toString();
        buf = buf.subarray(end + 4);
        const status = Number(head.split(' ')[1]);
        clearTimeout(timer);
        if (status !== 101) {
          refused = status;
          refusedDone();
          return;
        }
        const accept = /sec-websocket-accept:\s*(\S+)/i.exec(head)?.[1];
        resolve({ status, head, accept, want, ws });
      }
      frames();
    });
  });
}
