"""An example consumer built on the backlog_client package (clients/python): works one queue,
and writes a line per event to a log file, so that what it did can be checked from outside
(backlog's CI test of the SQL contract runs it beside `backlog work`):

    run I ID ATTEMPT     the handler started job ID, whose payload is {"i": I, ...}
    OUTCOME I ID         completed, retry, dead, cancelled, or lost (the lease was lost: the
                         outcome was refused and another worker owns the job)

A payload with "fail_once": true fails its first attempt (and is retried after the queue's
backoff). `--stall-after N` makes the worker freeze, as a hung or dying process would, when it
holds its (N+1)-th job: it writes {"id", "token", "owner"} of that job to --stall-file and sleeps
while its heartbeats keep the lease, until it is killed.

    pip install ./clients/python      # or: PYTHONPATH=clients/python/src
    python3 examples/python/worker.py sqlite:///tmp/q.db emails --log emails.log --drain
"""

import argparse
import json
import os
import signal
import sys
import time

import backlog_client


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("url")
    p.add_argument("queue")
    p.add_argument("--log", required=True, help="append one line per event here")
    p.add_argument("--owner", help="lease owner to record (default host:pid)")
    p.add_argument("--batch", type=int, default=10, help="jobs claimed at once")
    p.add_argument("--drain", action="store_true", help="exit once the queue is empty")
    p.add_argument("--work-ms", type=float, default=1.0, help="time each job takes")
    p.add_argument("--stall-after", type=int, help="freeze on the job after this many")
    p.add_argument("--stall-file", help="where --stall-after writes the frozen job")
    a = p.parse_args()

    log = open(a.log, "a", buffering=1)  # a line at a time: nothing is lost to a SIGKILL
    handled = 0

    def handle(job: backlog_client.Job) -> None:
        nonlocal handled
        if a.stall_after is not None and handled == a.stall_after:
            tmp = a.stall_file + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"id": job.id, "token": job.token, "owner": consumer.owner}, f)
            os.rename(tmp, a.stall_file)  # appears whole
            log.write(f"run {job.payload['i']} {job.id} {job.attempt}\n")
            while True:
                time.sleep(3600)
        handled += 1
        log.write(f"run {job.payload['i']} {job.id} {job.attempt}\n")
        time.sleep(a.work_ms / 1000)
        if job.payload.get("fail_once") and job.attempt == 1:
            raise RuntimeError("fails once on purpose")

    def outcome(job: backlog_client.Job, what: str) -> None:
        log.write(f"{what} {job.payload['i']} {job.id}\n")

    client = backlog_client.connect(a.url)
    consumer = backlog_client.Consumer(client, a.queue, handle, batch=a.batch, owner=a.owner,
                                       on_outcome=outcome)
    # SIGTERM: finish the job in hand, give the rest of the batch back, exit.
    signal.signal(signal.SIGTERM, lambda *_: consumer.stop.set())
    consumer.run(drain=a.drain)
    return 0


if __name__ == "__main__":
    sys.exit(main())
