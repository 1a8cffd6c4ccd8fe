// A minimal WebSocket client (RFC 6455 handshake, one masked text frame
// out, one frame back) over a raw TCP connection, so a test controls the
// Host header and needs no library. Node 20 has no WebSocket client.
import net from 'node:net';
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
