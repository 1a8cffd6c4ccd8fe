#!/bin/sh
# Boots the current guest image under QEMU (TCG, no network device) and checks
# it through the guest agent: resync, guest-ping, guest-exec as the sandbox
# user (setpriv), the user's identity, no sudo, a few guest properties, then
# guest-shutdown; and through aas-agent on its own port: the handshake, a
# command as the sandbox user and `true` round trips. Prints timings. Exit
# status 0 when every check passed.
#
# usage: smoke.sh STATE_DIR [RUNS]     (RUNS boots, default 1)
# env:   SMOKE_KEEP=1 keeps the work dir (console logs) for inspection;
#        SMOKE_MACHINE (q35), SMOKE_MEM (512 MiB), SMOKE_POLL (guest-exec-status
#        interval, 0.01 s), SMOKE_INITRD (another initrd) for measurements
set -eu

[ $# -ge 1 ] || { echo "usage: $0 STATE_DIR [RUNS]" >&2; exit 2; }
IMG=$(cd "$1/images/current" && pwd -P) || { echo "smoke: no image in $1" >&2; exit 1; }
RUNS=${2:-1}
for f in base.qcow2 vmlinuz initrd.img manifest.json; do
	[ -f "$IMG/$f" ] || { echo "smoke: $IMG/$f missing" >&2; exit 1; }
done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
WORK=$(mktemp -d /tmp/aas-smoke.XXXXXX)
cleanup() {
	rc=$?
	if [ "${SMOKE_KEEP:-0}" = 1 ]; then echo "smoke: kept $WORK" >&2; else rm -rf "$WORK"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$PY" - "$IMG" "$WORK" "$RUNS" <<'EOF'
import base64, json, os, socket, statistics, struct, subprocess, sys, time

img, work, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
initrd = os.environ.get("SMOKE_INITRD", os.path.join(img, "initrd.img"))
CMDLINE = "console=ttyS0 root=/dev/vda rw quiet"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


class Chan:
    """A guest agent's Unix socket, read into self.buf."""

    def __init__(self, path, name):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf, self.name = b"", name

    def fill(self, deadline):
        """More bytes into self.buf; False at the deadline."""
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        self.s.settimeout(left)
        try:
            data = self.s.recv(65536)
        except socket.timeout:
            return False
        if not data:
            raise EOFError(f"{self.name} socket closed")
        self.buf += data
        return True


class Agent(Chan):
    def __init__(self, path):
        super().__init__(path, "agent")
        self.next_id = int(time.time() * 1000) % 1000000000

    def send(self, obj, delimit=False):
        self.s.sendall((b"\xff" if delimit else b"") + json.dumps(obj).encode() + b"\n")

    def recv(self, timeout):
        """One JSON reply (0xFF delimiters dropped), or None on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            self.buf = self.buf.replace(b"\xff", b"")
            line, sep, rest = self.buf.partition(b"\n")
            if sep:
                self.buf = rest
                if line.strip():
                    return json.loads(line)
                continue
            if not self.fill(deadline):
                return None

    def sync(self, timeout, resend=2.0):
        """guest-sync-delimited until the reply to our latest id comes back."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.next_id += 1
            sid = self.next_id
            self.send({"execute": "guest-sync-delimited", "arguments": {"id": sid}}, True)
            until = min(deadline, time.monotonic() + resend)
            while time.monotonic() < until:
                r = self.recv(until - time.monotonic())
                if r is not None and r.get("return") == sid:
                    return True
        return False

    def cmd(self, execute, arguments=None, timeout=30):
        msg = {"execute": execute}
        if arguments is not None:
            msg["arguments"] = arguments
        self.send(msg)
        r = self.recv(timeout)
        if r is None:
            raise TimeoutError(execute)
        if "error" in r:
            raise RuntimeError(f"{execute}: {r['error']}")
        return r["return"]

    def run(self, argv, env=None, timeout=60):
        """guest-exec with captured output, polling guest-exec-status."""
        args = {"path": argv[0], "arg": argv[1:], "capture-output": True}
        if env is not None:
            args["env"] = env
        pid = self.cmd("guest-exec", args)["pid"]
        deadline = time.monotonic() + timeout
        while True:
            st = self.cmd("guest-exec-status", {"pid": pid})
            if st["exited"]:
                dec = lambda k: base64.b64decode(st.get(k, "")).decode(errors="replace")
                return st.get("exitcode", -1), dec("out-data"), dec("err-data")
            if time.monotonic() > deadline:
                raise TimeoutError(" ".join(argv))
            time.sleep(POLL)


class AasAgent(Chan):
    """aas-agent's protocol (aproto.h): SYNC+HELLO, then 12-byte headers and tagged fields."""
    SYNC = b"\xaa\x55\x01\xfeaas-agent-sy"  # AP_SYNC_LEN (16) bytes of AP_SYNC
    T_HELLO, T_EXEC, T_WINDOW, T_STARTED, T_STDOUT, T_STDERR, T_EXIT = 0x01, 0x10, 0x14, 0x20, 0x21, 0x22, 0x23
    TAG_ARG, TAG_SIZE, TAG_PID, TAG_CODE, TAG_NONCE, TAG_VERSION, TAG_BOOT_ID = 1, 17, 23, 24, 26, 27, 28

    def __init__(self, path):
        super().__init__(path, "aas-agent")
        self.sync, self.chan = False, 0

    @staticmethod
    def field(tag, data):
        return bytes([tag]) + struct.pack(">I", len(data)) + data

    @staticmethod
    def fields(p):
        out, i = {}, 0
        while i + 5 <= len(p):
            n = struct.unpack(">I", p[i + 1:i + 5])[0]
            out.setdefault(p[i], p[i + 5:i + 5 + n])
            i += 5 + n
        return out

    def send(self, typ, chan, payload, sync=False):
        self.s.sendall((self.SYNC if sync else b"") + struct.pack(">IHHI", len(payload), typ, 0, chan) + payload)

    def recv(self, timeout):
        """(type, chan, payload) or None at the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.sync:
                i = self.buf.find(self.SYNC)
                if i >= 0:
                    self.buf, self.sync = self.buf[i + 16:], True
                    continue
            elif len(self.buf) >= 12:
                n, typ, _, chan = struct.unpack(">IHHI", self.buf[:12])
                if n > 128 * 1024:
                    self.sync = False
                    continue
                if len(self.buf) >= 12 + n:
                    p, self.buf = self.buf[12:12 + n], self.buf[12 + n:]
                    return typ, chan, p
            if not self.fill(deadline):
                return None

    def hello(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.send(self.T_HELLO, 0, self.field(self.TAG_NONCE, struct.pack(">Q", 4242)), sync=True)
            until = time.monotonic() + 1
            while time.monotonic() < until:
                f = self.recv(until - time.monotonic())
                if f and f[0] == self.T_HELLO:
                    v = self.fields(f[2])
                    if struct.unpack(">Q", v[self.TAG_NONCE])[0] == 4242:
                        return struct.unpack(">I", v[self.TAG_VERSION])[0], v[self.TAG_BOOT_ID].decode()
        return None

    def run(self, argv, timeout=30):
        """(code, stdout, request->EXIT s, STARTED->EXIT s)"""
        self.chan += 1
        t0, ts, out = time.monotonic(), None, b""
        self.send(self.T_EXEC, self.chan, b"".join(self.field(self.TAG_ARG, a.encode()) for a in argv))
        while True:
            f = self.recv(timeout)
            if f is None:
                raise TimeoutError(" ".join(argv))
            typ, chan, p = f
            if chan != self.chan:
                continue
            if typ == self.T_STARTED:
                ts = time.monotonic()
            elif typ in (self.T_STDOUT, self.T_STDERR):
                if typ == self.T_STDOUT:
                    out += p
                if p:
                    self.send(self.T_WINDOW, chan, self.field(self.TAG_SIZE, struct.pack(">Q", len(p))))
            elif typ == self.T_EXIT:
                t = time.monotonic()
                code = struct.unpack(">I", self.fields(p)[self.TAG_CODE])[0]
                return code, out.decode(errors="replace"), t - t0, t - (ts or t0)
            else:
                raise RuntimeError(f"{argv}: frame {typ:#x} {p!r}")


POLL = float(os.environ.get("SMOKE_POLL", "0.01"))  # guest-exec-status interval
# guest-exec's env replaces the agent's environment; setpriv keeps it as is.
SANDBOX_ENV = ["HOME=/home/sandbox", "USER=sandbox", "LOGNAME=sandbox", "SHELL=/bin/bash",
               "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"]
AS_SANDBOX = ["/usr/bin/setpriv", "--reuid=1000", "--regid=1000", "--init-groups", "--inh-caps=-all"]


def boot(n):
    overlay = os.path.join(work, f"overlay{n}.qcow2")
    sock = os.path.join(work, f"qga{n}.sock")
    asock = os.path.join(work, f"aas{n}.sock")
    console = os.path.join(work, f"console{n}.log")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2",
                    "-b", os.path.join(img, "base.qcow2"), overlay], check=True)
    argv = ["qemu-system-x86_64", "-accel", "tcg", "-M", os.environ.get("SMOKE_MACHINE", "q35"),
            "-smp", "1", "-m", os.environ.get("SMOKE_MEM", "512"),
            "-nodefaults", "-no-user-config", "-nic", "none", "-display", "none", "-no-reboot",
            "-kernel", os.path.join(img, "vmlinuz"), "-initrd", initrd,
            "-append", CMDLINE,
            "-drive", f"file={overlay},format=qcow2,if=virtio,cache=unsafe,discard=unmap",
            "-device", "virtio-serial-pci",
            "-chardev", f"socket,id=qga,path={sock},server=on,wait=off",
            "-device", "virtserialport,chardev=qga,name=org.qemu.guest_agent.0",
            "-chardev", f"socket,id=aas,path={asock},server=on,wait=off",
            "-device", "virtserialport,chardev=aas,name=org.aas.agent.0",
            "-device", "virtio-rng-pci",
            "-serial", f"file:{console}"]
    t0 = time.monotonic()
    qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    res = {}
    try:
        while not os.path.exists(sock):
            if qemu.poll() is not None:
                raise RuntimeError(f"qemu exited with {qemu.returncode}")
            if time.monotonic() - t0 > 10:
                raise TimeoutError("no agent socket")
            time.sleep(0.01)
        ag = Agent(sock)
        if not ag.sync(120):
            raise TimeoutError("guest agent never answered")
        ag.cmd("guest-ping")
        res["boot"] = time.monotonic() - t0
        print(f"boot {n}: first guest-ping answer {res['boot']:.2f} s after QEMU start", flush=True)

        code, out, err = ag.run(AS_SANDBOX + ["/bin/bash", "-c", "id -un; sudo true; echo $?"])
        lines = out.split()
        check(code == 0 and lines[:1] == ["sandbox"], f"setpriv runs as sandbox (out={out!r})")
        check(len(lines) == 2 and lines[1] != "0", f"sudo absent or failing (sudo exit {lines[1:]}, err={err.strip()!r})")

        rt = []
        for _ in range(10):
            t = time.monotonic()
            code, out, _ = ag.run(AS_SANDBOX + ["/bin/echo", "hi"])
            rt.append(time.monotonic() - t)
            check(code == 0 and out == "hi\n", "echo hi") if len(rt) == 1 else None
        res["echo"] = statistics.median(rt)
        print(f"boot {n}: echo hi via guest-exec+setpriv: median {res['echo']*1000:.0f} ms "
              f"(min {min(rt)*1000:.0f}, max {max(rt)*1000:.0f})", flush=True)

        ag2 = AasAgent(asock)
        hello = ag2.hello(30)
        check(hello is not None and hello[0] == 1, f"aas-agent answers HELLO (version, boot id: {hello})")
        code, out, _, _ = ag2.run(["bash", "-c", "echo hi; id -un; pwd"])
        check(code == 0 and out == "hi\nsandbox\n/home/sandbox\n", f"aas-agent runs as sandbox (out={out!r})")
        for key, argv in (("aas_true", ["true"]), ("aas_bash_true", ["bash", "-c", "true"])):
            rt = [ag2.run(argv)[2:] for _ in range(20)]
            req = statistics.median(r[0] for r in rt) * 1000
            started = statistics.median(r[1] for r in rt) * 1000
            print(f"boot {n}: aas-agent {' '.join(argv)!r} x20: request->EXIT median {req:.0f} ms, "
                  f"STARTED->EXIT median {started:.0f} ms (min {min(r[0] for r in rt)*1000:.0f})", flush=True)
            res[key] = req

        if n == 1:
            probe = ("cat /proc/1/comm; hostname; ls /sys/class/net | tr '\\n' ' '; echo; "
                     "ip -o -4 addr show lo | awk '{print $4}'; stat -c '%a' /tmp; "
                     "stat -c '%U:%G %a' /home/sandbox; id sandbox; "
                     "findmnt -no FSTYPE,OPTIONS /; ls /dev/virtio-ports | tr '\\n' ' '; echo; "
                     "sh -c 'sleep 0.2 & exit 0'; sleep 0.5; ps -eo stat= | grep -c '^Z' || true; "
                     "find / -xdev -type f -perm /6000 | wc -l")
            code, out, err = ag.run(["/bin/bash", "-c", probe])
            v = out.splitlines()
            print("guest: " + " | ".join(v), flush=True)
            check(v[0] == "aas-init", "PID 1 is aas-init")
            check(v[1] == "sandbox", "hostname sandbox")
            check(v[2].split() == ["lo"], "only network device is lo")
            check(v[3] == "127.0.0.1/8", "lo up with 127.0.0.1")
            check(v[4] == "1777", "/tmp mode 1777")
            check(v[5] == "sandbox:sandbox 755", "/home/sandbox owned by sandbox, 0755")
            check(v[6] == "uid=1000(sandbox) gid=1000(sandbox) groups=1000(sandbox)", "sandbox in no other group")
            check(v[7].split()[0] == "ext4" and v[7].split()[1].startswith("rw,"), "root ext4 read-write")
            check("org.qemu.guest_agent.0" in v[8] and "org.aas.agent.0" in v[8], "/dev/virtio-ports links")
            check(v[9] == "0", "orphans reaped (no zombies)")
            check(v[10] == "0", "no set-user/group-ID files")
            code, out, err = ag.run(AS_SANDBOX + ["/bin/bash", "-c",
                                    "cd && echo x > f && python3 -c 'print(1+1)' && git --version >/dev/null && echo ok"],
                                    env=SANDBOX_ENV)
            check(code == 0 and out.strip() == "2\nok", f"sandbox writes home, runs python3 and git ({err.strip()!r})")

        t = time.monotonic()
        ag.send({"execute": "guest-shutdown"})
        try:
            qemu.wait(timeout=30)
            res["shutdown"] = time.monotonic() - t
            print(f"boot {n}: guest-shutdown -> QEMU exited in {res['shutdown']:.2f} s", flush=True)
            check(qemu.returncode == 0, "QEMU exited cleanly after guest-shutdown")
        except subprocess.TimeoutExpired:
            check(False, "guest-shutdown powered the guest off")
    finally:
        if qemu.poll() is None:
            qemu.kill()
            qemu.wait()
        if failures:
            print(f"--- console {n} ---\n" + open(console, errors="replace").read()[-4000:], flush=True)
    return res


results = []
for n in range(1, runs + 1):
    try:
        results.append(boot(n))
    except Exception as e:  # noqa: BLE001
        check(False, f"boot {n}: {type(e).__name__}: {e}")
if results and runs > 1:
    boots = sorted(r["boot"] for r in results if "boot" in r)
    print(f"boot to first guest-ping over {len(boots)} runs: median {statistics.median(boots):.2f} s, "
          f"min {boots[0]:.2f}, max {boots[-1]:.2f}")
print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failed check(s)")
sys.exit(1 if failures else 0)
EOF
