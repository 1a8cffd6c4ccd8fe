"""SMTP sink for the end-to-end tests: accepts every message on
127.0.0.1:PORT (any sender, any recipient, no AUTH, no TLS) and writes
each one as a file DIR/NNNNNN.eml holding its raw RFC 5322 text, with
the SMTP envelope prepended as X-Envelope-From / X-Envelope-To headers.
A file appears whole (written aside, then renamed).

Usage: smtp_sink.py PORT DIR
Runs until its standard input reaches end of file (the test process
that started it closed the pipe or died), or SIGTERM / SIGINT.
Needs Debian's python3-aiosmtpd.
"""

import ctypes
import os
import signal
import sys
import threading

from aiosmtpd.controller import Controller


def die_with_parent():
    # Linux: SIGKILL when the process that started us is gone, even if
    # something keeps our standard input open.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:
            os._exit(1)
    except (OSError, AttributeError):
        pass


class Sink:
    def __init__(self, directory):
        self.directory = directory
        self.lock = threading.Lock()
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.count += 1
            n = self.count
        head = "X-Envelope-From: <%s>\r\nX-Envelope-To: %s\r\n" % (
            envelope.mail_from or "",
            ", ".join("<%s>" % r for r in envelope.rcpt_tos),
        )
        data = head.encode("utf-8", "surrogateescape") + envelope.original_content
        tmp = os.path.join(self.directory, ".%06d.tmp" % n)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(self.directory, "%06d.eml" % n))
        return "250 OK"


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: smtp_sink.py PORT DIR\n")
        return 2
    port = int(sys.argv[1])
    directory = sys.argv[2]
    die_with_parent()

    def stop(_sig, _frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    controller = Controller(
        Sink(directory),
        hostname="127.0.0.1",
        port=port,
        # A fixed name: the default looks up this host's FQDN.
        server_hostname="aas-test-sink",
        decode_data=False,
        enable_SMTPUTF8=True,
    )
    controller.start()
    sys.stdout.write("listening on 127.0.0.1:%d\n" % port)
    sys.stdout.flush()
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        controller.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
