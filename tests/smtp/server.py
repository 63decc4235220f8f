#!/usr/bin/env python3
"""A real SMTP server for hane's delivery tests, on aiosmtpd.

Its dependency, aiosmtpd, is pinned in tests/requirements.txt and installed
by `cargo xtask test` into the virtual environment target/test-env/venv.

Usage:

    server.py --port 0 --maildir DIR [--host 127.0.0.1]
              [--starttls CERT KEY | --tls CERT KEY] [--auth USER:PASS]
              [--delay-ms N] [--reject-rcpt REGEX] [--exit-with-stdin]

The first line on stdout is the port the server listens on (useful with
--port 0, which picks a free one); everything else goes to stderr.

Each accepted message is written to DIR as one file, `<ns>-<pid>-<n>.eml`,
holding the message exactly as received. Files are written under a name
starting with "." and renamed when complete, so readers should skip names
starting with ".".

--starttls CERT KEY  offer STARTTLS with this PEM certificate and key, and
                     require it before AUTH, MAIL and the rest
--tls CERT KEY       speak TLS from the first byte (SMTPS) with this PEM
                     certificate and key
--auth USER:PASS     require AUTH PLAIN or LOGIN with these credentials
--delay-ms N         sleep N ms after the message data arrives and before
                     answering 250 (a slow server, or a window to crash in)
--reject-rcpt REGEX  answer 550 to RCPT TO addresses matching REGEX (search)
--exit-with-stdin    exit when stdin reaches end of file, so the server dies
                     with the test process that holds the other end
"""

import argparse
import asyncio
import itertools
import os
import re
import ssl
import sys
import time

try:
    from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword
except ImportError:
    sys.stderr.write(
        "aiosmtpd is not installed; `cargo xtask test` provisions it in target/test-env/venv\n"
    )
    sys.exit(3)


class Handler:
    def __init__(self, maildir, delay_ms, reject_rcpt):
        self.maildir = maildir
        self.delay = delay_ms / 1000
        self.reject_rcpt = re.compile(reject_rcpt) if reject_rcpt else None
        self.counter = itertools.count(1)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.reject_rcpt and self.reject_rcpt.search(address):
            log(f"rejecting recipient {address}")
            return f"550 5.1.1 <{address}>: recipient rejected by test server"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.delay:
            log(f"holding the message for {self.delay}s before answering")
            await asyncio.sleep(self.delay)
        n = next(self.counter)
        name = f"{time.time_ns()}-{os.getpid()}-{n}.eml"
        temporary = os.path.join(self.maildir, f".{name}.tmp")
        with open(temporary, "wb") as f:
            f.write(envelope.original_content or envelope.content)
        os.rename(temporary, os.path.join(self.maildir, name))
        log(f"accepted message {n} from {envelope.mail_from} to {envelope.rcpt_tos}")
        return f"250 2.0.0 OK: queued as {n}"


def log(message):
    print(f"smtp test server: {message}", file=sys.stderr, flush=True)


def authenticator_for(user, password):
    def authenticate(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == user.encode()
            and auth_data.password == password.encode()
        )
        # handled=False: aiosmtpd sends the 235 or 535 reply itself.
        return AuthResult(success=ok, handled=False)

    return authenticate


def tls_context(cert, key):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


async def exit_with_stdin():
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.buffer.read)
    log("stdin closed; exiting")
    os._exit(0)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--maildir", required=True)
    parser.add_argument("--starttls", nargs=2, metavar=("CERT", "KEY"))
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    parser.add_argument("--auth", metavar="USER:PASS")
    parser.add_argument("--delay-ms", type=int, default=0)
    parser.add_argument("--reject-rcpt", metavar="REGEX")
    parser.add_argument("--exit-with-stdin", action="store_true")
    args = parser.parse_args()
    if args.starttls and args.tls:
        parser.error("--starttls and --tls exclude each other")

    os.makedirs(args.maildir, exist_ok=True)
    handler = Handler(args.maildir, args.delay_ms, args.reject_rcpt)
    options = {"enable_SMTPUTF8": True, "hostname": "hane-smtp-test"}
    if args.starttls:
        options.update(tls_context=tls_context(*args.starttls), require_starttls=True)
    implicit_tls = tls_context(*args.tls) if args.tls else None
    if args.auth:
        user, sep, password = args.auth.partition(":")
        if not sep:
            parser.error("--auth takes USER:PASS")
        options.update(
            authenticator=authenticator_for(user, password),
            auth_required=True,
            # aiosmtpd's check only knows STARTTLS; --tls is encrypted anyway.
            auth_require_tls=bool(args.starttls),
        )

    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(handler, **options), host=args.host, port=args.port, ssl=implicit_tls
    )
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    log(f"listening on {args.host}:{port}, writing to {args.maildir}")
    if args.exit_with_stdin:
        asyncio.ensure_future(exit_with_stdin())
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
