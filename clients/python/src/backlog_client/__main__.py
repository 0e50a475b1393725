"""`python3 -m backlog_client enqueue URL QUEUE [PAYLOAD …] [--jsonl FILE]`: enqueues JSON
payloads with the plain INSERT, all in one transaction, and prints how many."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from ._client import connect
from .errors import BacklogError


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m backlog_client",
                                description="A backlog producer speaking the SQL contract.")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("enqueue", help="enqueue JSON payloads with the plain INSERT")
    e.add_argument("url")
    e.add_argument("queue")
    e.add_argument("payloads", nargs="*", help="JSON payloads")
    e.add_argument("--jsonl", help="a file of payloads, one JSON value a line")
    e.add_argument("--kind")
    e.add_argument("--priority", type=int)
    a = p.parse_args(argv)
    payloads = list(a.payloads)
    if a.jsonl:
        with open(a.jsonl) as f:
            payloads += [line.strip() for line in f if line.strip()]
    try:
        values = [json.loads(payload) for payload in payloads]  # all JSON, before any is written
    except json.JSONDecodeError as err:
        print(f"backlog_client: a payload is not JSON: {err}", file=sys.stderr)
        return 2
    jobs = [{"queue": a.queue, "payload": v, "kind": a.kind, "priority": a.priority}
            for v in values]
    try:
        with connect(a.url) as client:
            ids = client.enqueue_many(jobs)  # all or nothing
    except BacklogError as err:
        print(f"backlog_client: {err}", file=sys.stderr)
        return 2
    print(len(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
