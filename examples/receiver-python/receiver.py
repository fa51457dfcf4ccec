#!/usr/bin/env python3
"""An HTTP destination of Intake's dispatcher in Python: each event changes
the database once, however often it is retried. Verify the Standard Webhooks
signature over the raw body (401, nothing written); in one transaction claim
the webhook-id in intake_subscriber.handled and, only if the claim is new,
make the change; commit; answer. A retry finds the claim: 200.

Only the standard library and psycopg 3 (Debian: apt-get install python3-psycopg).
"""
import base64
import hashlib
import hmac
import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg

DATABASE_URL = os.environ.get("DATABASE_URL", "")
NAME = os.environ.get("RECEIVER_NAME", "example-receiver")  # the claim's consumer
KEYS = [base64.b64decode(s.removeprefix("whsec_")) for s in os.environ.get("WEBHOOK_SECRET", "").split()]  # several while rotating
KILL_AFTER_COMMIT = set(os.environ.get("KILL_AFTER_COMMIT", "").split(","))  # a fault hook for the tests
MAX_BODY = 1 << 20  # Intake's default body limit
TOLERANCE = 5 * 60

CLAIM = """INSERT INTO intake_subscriber.handled (consumer, key, execution_id) VALUES (%s, %s, %s)
    ON CONFLICT DO NOTHING RETURNING key"""
CHANGE = "INSERT INTO example_receiver.events (webhook_id, key, event_type, body) VALUES (%s, %s, %s, %s::jsonb)"


def verified(headers, body):
    """Any signature in webhook-signature is "v1," + base64 HMAC-SHA256 of
    "{id}.{timestamp}.{body}" under a configured key, and the timestamp is
    within 5 minutes of now."""
    msg_id, ts, sigs = (headers.get(h, "") for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not (msg_id and ts.isascii() and ts.isdigit() and abs(time.time() - int(ts)) <= TOLERANCE):
        return False
    signed = f"{msg_id}.{ts}.".encode() + body
    expected = [b"v1," + base64.b64encode(hmac.new(k, signed, hashlib.sha256).digest()) for k in KEYS]
    return any(hmac.compare_digest(s.encode(), e) for s in sigs.split(" ") for e in expected)


def as_json(body):
    """The body for the jsonb column, None when it is not JSON."""
    try:
        json.loads(body)
        return body.decode()
    except ValueError:
        return None


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = self.headers.get("Content-Length", "")
        if not (length.isascii() and length.isdigit()):
            return self.answer(411)  # Intake sends one; http.server does not read chunked bodies
        if int(length) > MAX_BODY:
            return self.answer(413)
        body = self.rfile.read(int(length))
        if not verified(self.headers, body):
            return self.answer(401)
        msg_id = self.headers["webhook-id"]
        try:
            with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
                with conn.transaction():  # BEGIN … COMMIT, ROLLBACK on an exception
                    claimed = conn.execute(CLAIM, (NAME, msg_id, self.headers.get("Intake-Execution-Id", ""))).fetchone() is not None
                    if claimed:  # the change, in the claim's transaction; a retry skips it
                        conn.execute(CHANGE, (msg_id, self.headers.get("Intake-Key"), self.headers.get("Intake-Event-Type"), as_json(body)))
        except Exception as err:
            self.log_error("%s: %s", msg_id, err)
            return self.answer(500)
        if claimed and msg_id in KILL_AFTER_COMMIT:
            os.kill(os.getpid(), signal.SIGKILL)  # committed, not answered
        self.answer(204 if claimed else 200)

    def answer(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


def main():
    if not KEYS or not DATABASE_URL:
        sys.exit("WEBHOOK_SECRET (whsec_…) and DATABASE_URL are required")
    host, _, port = os.environ.get("LISTEN", "127.0.0.1:8090").rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), Receiver)
    print(f"listening on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
