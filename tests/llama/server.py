#!/usr/bin/env python3
"""A real llama.cpp HTTP server for hane's model tests, on xllamacpp.

Its dependency, xllamacpp (llama.cpp's own server compiled into a Python
extension), is pinned in tests/requirements.txt; `cargo xtask test` installs
it into the virtual environment target/test-env/venv and puts the model, a
GGUF file, in target/test-env/models.

Usage:

    server.py --model PATH --alias NAME --api-key KEY --template PATH
              [--port N]

--model PATH     the GGUF model file
--alias NAME     the model name clients send (and /v1/models lists)
--api-key KEY    the key every request must carry (`Authorization: Bearer
                 KEY` or `x-api-key: KEY`); requests without it get 401
--template PATH  a Jinja chat template used in place of the model's own
                 (tests/llama/chatml-tools.jinja gives it a tools section)
--port N         the port to listen on, on 127.0.0.1; 0 or absent picks a
                 free one

It listens on 127.0.0.1 only. Once `GET /health` answers 200 it prints one
line, `listening on 127.0.0.1:PORT`, to stdout; everything else (llama.cpp's
log included) goes to stderr. It exits when stdin reaches end of file, so it
dies with the test process that holds the other end, and on SIGTERM.

Generation runs on one thread (with two, ggml's spinning threads collapse
throughput on a small machine), one request at a time (`n_parallel` 1:
others queue), with a 4096-token context.
"""

import argparse
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

try:
    import xllamacpp
except ImportError:
    sys.stderr.write(
        "llama test server: xllamacpp is not installed; `cargo xtask test` provisions it "
        "in target/test-env/venv\n"
    )
    sys.exit(3)

HOST = "127.0.0.1"


def log(message):
    print(f"llama test server: {message}", file=sys.stderr, flush=True)


def fail(message):
    log(message)
    # os._exit: the server's threads must not keep the process alive.
    sys.stderr.flush()
    os._exit(1)


def wait_healthy(base, deadline):
    """Polls GET /health (no key needed) until it answers 200."""
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
                if response.status == 200:
                    return
                last = f"status {response.status}"
        except urllib.error.HTTPError as e:
            last = f"status {e.code}"
        except OSError as e:
            last = str(e)
        time.sleep(0.05)
    fail(f"{base}/health did not answer 200 in time (last: {last})")


def exit_with_stdin():
    sys.stdin.buffer.read()
    log("stdin closed; exiting")
    sys.stderr.flush()
    os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--template", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    if not os.path.isfile(args.model):
        fail(f"no model file at {args.model}; `cargo xtask provision` puts it in place")
    try:
        with open(args.template, encoding="utf-8") as f:
            template = f.read()
    except OSError as e:
        fail(f"cannot read the chat template {args.template}: {e}")

    # From here on, the end of stdin ends the server, even while it loads.
    threading.Thread(target=exit_with_stdin, daemon=True).start()

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    # A set of names in this build (a plain string would become its letters).
    params.model_alias = {args.alias}
    params.api_keys = [args.api_key]
    params.hostnames = [HOST]
    params.port = args.port
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.n_ctx = 4096
    params.n_parallel = 1
    params.use_jinja = True
    # The template's text (llama.cpp's --chat-template-file reads a file
    # into this same field).
    params.chat_template = template
    params.ui = False

    log(f"loading {args.model} as {args.alias!r}")
    started = time.monotonic()
    try:
        # Loads the model, then serves in a background thread.
        server = xllamacpp.Server(params)
    except Exception as e:  # xllamacpp raises RuntimeError; llama.cpp logged why above
        fail(f"the server did not start: {e}")
    base = server.listening_address.rstrip("/")
    wait_healthy(base, started + 120)
    port = base.rsplit(":", 1)[1]
    log(f"ready at {base} after {time.monotonic() - started:.2f}s")
    print(f"listening on {HOST}:{port}", flush=True)

    # The server runs in its own threads; this one only waits for an exit.
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        os._exit(0)
