"""The same over HTTP, for programs that cannot reach the database: a producer and a worker
speaking `backlog serve`'s API and worker protocol (docs/http.md), with a bearer token, on the
standard library only (`urllib.request`, `json`).

    from backlog_client.http import HttpClient, HttpConsumer

    client = HttpClient("https://queue.example.com", token=os.environ["BACKLOG_TOKEN"])
    client.enqueue("emails", {"to": "a@example.com"}, delay=60)

    def send(job):              # return: complete; raise: fail (retried with backoff)
        deliver(job.payload["to"])

    HttpConsumer(client, "emails", send).run()

Input is checked here, as the SQL producer checks it (`_validate`), before any request is sent;
the server's error answers become this package's typed errors where they mean the same
(docs/http.md "Errors"): InvalidName, InvalidPayload, InvalidOption, LeaseLost (a stale lease
token), Unauthorized (401, 403), and HttpError for the rest. A connection that cannot be made
raises urllib's own `URLError` (an `OSError`), unchanged.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import (
    Any,
    Callable,
    Iterable,
    Mapping,
    Optional,
    Sequence,
    Union,
    overload,
)

from . import _validate as check
from ._consumer import HeldLeases, Outcome
from ._job import Job, Retry, default_owner, now_us
from ._produce import OPTIONS
from .errors import (
    BacklogError,
    HttpError,
    InvalidName,
    InvalidOption,
    InvalidPayload,
    LeaseLost,
    Unauthorized,
)

#: Error codes of the API that mean a name was refused, and which name.
_NAME_CODES = {
    "queue_name_invalid": "queue name",
    "kind_invalid": "kind",
    "unique_key_invalid": "unique key",
    "group_key_invalid": "group key",
}
_PAYLOAD_CODES = {"payload_invalid", "payload_too_large"}
_OPTION_CODES = {
    "duration_invalid", "option_invalid", "value_out_of_range", "batch_size_invalid",
    "token_invalid", "worker_invalid", "error_too_long", "trace_context_invalid",
}
#: Most jobs one batch enqueue takes (docs/http.md), and one batch completion.
MAX_BATCH = 10_000
MAX_COMPLETE = 1_000


def _duration(us: int) -> str:
    """Microseconds as the API's duration text (humantime's `us`)."""
    return f"{max(us, 0)}us"


def _lease(lease: Optional[check.Delay]) -> Optional[str]:
    if lease is None:
        return None
    us = check.delay_us(lease)
    if us < 1000:
        raise InvalidOption(f"a lease must be at least a millisecond, not {lease!r}")
    return _duration(us)


def error_of(status: int, body: bytes) -> BacklogError:
    """The error an answer with this status and body means (docs/http.md "Errors")."""
    code, message, job_id = "http_error", body.decode("utf-8", "replace")[:500], None
    try:
        err = json.loads(body)["error"]
        code, message = str(err["code"]), str(err.get("message", ""))
        job_id = err.get("job_id")
    except (ValueError, KeyError, TypeError):
        pass
    cause = HttpError(status, code, message, job_id if isinstance(job_id, int) else None)
    if status in (401, 403):
        return Unauthorized(status, code, message)
    typed: Optional[BacklogError] = None
    if code in _NAME_CODES:
        typed = InvalidName.refused(_NAME_CODES[code], message)
    elif code in _PAYLOAD_CODES:
        typed = InvalidPayload(message)
    elif code in _OPTION_CODES:
        typed = InvalidOption(message)
    elif code == "lease_lost" and isinstance(job_id, int):
        typed = LeaseLost(job_id, "request")
    if typed is None:
        return cause
    typed.__cause__ = cause
    return typed


def _job(view: Mapping[str, Any]) -> Job:
    """A claimed job as the claim describes it (docs/http.md "The worker protocol"). The claim
    does not send `run_at` or the group: they are 0 and None here."""
    trace: Optional[str] = None
    if view.get("traceparent"):
        carrier = {"traceparent": view["traceparent"]}
        if view.get("tracestate"):
            carrier["tracestate"] = view["tracestate"]
        trace = json.dumps(carrier, separators=(",", ":"))
    return Job(
        id=int(view["id"]),
        queue=str(view["queue"]),
        kind=view.get("kind"),
        payload=view.get("payload"),
        priority=int(view.get("priority", 0)),
        attempt=int(view["attempt"]),
        max_attempts=view.get("max_attempts"),
        run_at=0,
        created_at=int(view.get("created_at", 0)),
        token=int(view["token"]),
        lease_expires_at=int(view["lease_expires_at"]),
        trace_context=trace,
    )


class _Checked:
    """One job's enqueue body, checked: the JSON text to send and its trace context."""

    def __init__(self, queue: str, payload: Any, *, priority: Optional[int] = None,
                 run_at: Optional[check.Instant] = None, delay: Optional[check.Delay] = None,
                 max_attempts: Optional[int] = None, unique_key: Optional[str] = None,
                 kind: Optional[str] = None, group: Optional[str] = None,
                 trace_context: Optional[check.TraceContext] = None) -> None:
        rest: dict[str, Any] = {"queue": check.name("queue name", queue)}
        text = check.payload(payload)
        if kind is not None:
            rest["kind"] = check.name("kind", kind)
        if priority is not None:
            rest["priority"] = check.priority(priority)
        if run_at is not None and delay is not None:
            raise InvalidOption("give run_at or delay, not both")
        if run_at is not None:
            # The API takes a delay: run_at becomes one from this machine's clock.
            rest["delay"] = _duration(check.instant_us(run_at) - now_us())
        if delay is not None:
            rest["delay"] = _duration(check.delay_us(delay))
        if max_attempts is not None:
            rest["max_attempts"] = check.max_attempts(max_attempts)
        if unique_key is not None:
            rest["unique_key"] = check.key("unique key", unique_key)
        if group is not None:
            rest["group"] = check.key("group key", group)
        self.trace = None if trace_context is None else check.trace_context(trace_context)
        # The payload goes as the text checked, spliced in: the server stores the text sent.
        self.body = '{"payload":' + text + "," + json.dumps(rest, separators=(",", ":"))[1:]


class HttpClient:
    """`backlog serve`'s API at `base_url` (`http://127.0.0.1:8080`), with `token` sent as
    `Authorization: Bearer TOKEN` (a `produce` or `admin` token; none for a server on loopback
    without tokens). `timeout`: seconds per request. `worker`: the name claims record as the
    lease owner (default `host:pid`). Thread-safe: each request is its own connection."""

    def __init__(self, base_url: str, token: Optional[str] = None, *, timeout: float = 30.0,
                 worker: Optional[str] = None) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidOption(f"base_url must be an http:// or https:// URL, not {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.token, self.timeout = token, timeout
        self.worker = worker or default_owner()
        #: Requests sent (answered or not), for tests and curiosity.
        self.requests = 0

    # -- transport --------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Union[None, str, Mapping[str, Any]] = None,
                *, headers: Optional[Mapping[str, str]] = None) -> Any:
        """Sends one request and returns its JSON answer (None for 204); raises the error an
        error answer means (`error_of`)."""
        data = None
        sent = {"Accept": "application/json", **(headers or {})}
        if body is not None:
            text = body if isinstance(body, str) else json.dumps(body, separators=(",", ":"))
            data = text.encode()
            sent["Content-Type"] = "application/json"
        if self.token is not None:
            sent["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.base_url + path, data=data, headers=sent,
                                     method=method)
        self.requests += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                raw = res.read()
        except urllib.error.HTTPError as err:
            raw = err.read()
            err.close()
            failed = error_of(err.code, raw)
            raise failed from failed.__cause__
        return json.loads(raw) if raw else None

    def me(self) -> dict[str, Any]:
        """The token's name and scope (`GET /api/v1/me`)."""
        out: dict[str, Any] = self.request("GET", "/api/v1/me")
        return out

    # -- producer ---------------------------------------------------------------------------

    def enqueue(self, queue: str, payload: Any, *, priority: Optional[int] = None,
                run_at: Optional[check.Instant] = None, delay: Optional[check.Delay] = None,
                max_attempts: Optional[int] = None, unique_key: Optional[str] = None,
                kind: Optional[str] = None, group: Optional[str] = None,
                trace_context: Optional[check.TraceContext] = None) -> int:
        """Enqueues one job (`POST /api/v1/jobs`) with the options of the SQL `enqueue`, and
        returns its id; for a unique key an unfinished job of the queue holds, that job's id.
        `run_at` is sent as the delay from this machine's clock (the API takes delays). Bad
        input raises InvalidPayload, InvalidName or InvalidOption before anything is sent."""
        job = _Checked(queue, payload, priority=priority, run_at=run_at, delay=delay,
                       max_attempts=max_attempts, unique_key=unique_key, kind=kind,
                       group=group, trace_context=trace_context)
        try:
            out = self.request("POST", "/api/v1/jobs", job.body, headers=_trace(job.trace))
        except HttpError as err:
            if err.code == "unique_key_taken" and err.job_id is not None:
                return err.job_id
            raise
        return int(out["id"])

    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]], *,
                     trace_context: Optional[check.TraceContext] = None) -> list[int]:
        """Enqueues jobs in one request (`POST /api/v1/jobs/batch`, up to 10,000), all or
        none: each a mapping with `queue`, `payload` and any of `enqueue`'s options. Every job
        is checked before the request is sent. Returns their ids, in order (a taken unique key:
        the holder's). A batch has one trace context (the request's `traceparent`): give it
        here, or give every job the same one."""
        checked = []
        for i, job in enumerate(jobs):
            if not isinstance(job, Mapping):
                raise InvalidOption(
                    f"job {i}: expected a mapping with queue and payload, not {job!r}")
            unknown = set(job) - {"queue", "payload", *OPTIONS}
            if unknown:
                raise InvalidOption(f"job {i}: unknown options {sorted(unknown)}")
            if "queue" not in job or "payload" not in job:
                raise InvalidOption(f"job {i}: queue and payload are required")
            checked.append(_Checked(**job))
        if not 1 <= len(checked) <= MAX_BATCH:
            raise InvalidOption(f"a batch holds 1 to {MAX_BATCH} jobs, not {len(checked)}")
        traces = {j.trace for j in checked}
        if trace_context is not None:
            traces.add(check.trace_context(trace_context))
            traces.discard(None)
        if len(traces) > 1:
            raise InvalidOption("the jobs of a batch share one trace context over HTTP")
        trace = traces.pop()
        body = '{"jobs":[' + ",".join(j.body for j in checked) + "]}"
        out = self.request("POST", "/api/v1/jobs/batch", body, headers=_trace(trace))
        return [int(j["id"]) for j in out["jobs"]]

    # -- worker protocol --------------------------------------------------------------------

    def claim(self, queue: str, limit: int = 1, *, lease: Optional[check.Delay] = None,
              kinds: Optional[Sequence[str]] = None) -> list[Job]:
        """Claims up to `limit` (1 to 1,000) due jobs of `queue`, each with a fresh lease of
        `lease` (seconds or a timedelta; default the queue's): `Job`s whose `token` fences
        every later call. Empty when nothing is due."""
        check.name("queue name", queue)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidOption(f"limit must be 1 to 1,000, not {limit!r}")
        body: dict[str, Any] = {"limit": limit, "worker": self.worker}
        sent_lease = _lease(lease)
        if sent_lease is not None:
            body["lease"] = sent_lease
        if kinds:
            body["kinds"] = [check.name("kind", k) for k in kinds]
        out = self.request("POST", f"/api/v1/queues/{queue}/claim", body)
        return [_job(j) for j in out["jobs"]]

    def _fenced(self, job: Job, action: str, body: dict[str, Any],
                strict: bool) -> tuple[bool, Any]:
        """A call carrying the job's lease token: (True, the answer), or, when the lease was
        lost (409 `lease_lost`, or the job gone: 404), (False, None) with the job marked lost,
        or LeaseLost with `strict`."""
        body = {"token": str(job.token), **body}
        try:
            return True, self.request("POST", f"/api/v1/jobs/{job.id}/{action}", body)
        except (LeaseLost, HttpError) as err:
            if isinstance(err, HttpError) and err.code != "job_not_found":
                raise
            job.lost = True
            if strict:
                raise LeaseLost(job.id, action) from err
            return False, None

    def heartbeat(self, job: Job, *, lease: Optional[check.Delay] = None,
                  strict: bool = False) -> bool:
        """Extends the job's lease by `lease` from now (default: the queue's lease). Returns
        whether the lease held; sets `job.lease_expires_at`, and `job.cancel_requested` when an
        operator asked for the job to be cancelled."""
        body: dict[str, Any] = {}
        sent_lease = _lease(lease)
        if sent_lease is not None:
            body["lease"] = sent_lease
        held, out = self._fenced(job, "heartbeat", body, strict)
        if not held:
            return False
        job.lease_expires_at = int(out["lease_expires_at"])
        job.cancel_requested = job.cancel_requested or bool(out["cancel_requested"])
        return True

    def progress(self, job: Job, progress: Any, *, strict: bool = False) -> bool:
        """Stores `progress` (any JSON value) on the running job; returns whether the lease
        held."""
        check.payload(progress)
        return self._fenced(job, "progress", {"progress": progress}, strict)[0]

    @overload
    def complete(self, job: Job, *, result: Any = None, strict: bool = False) -> bool: ...

    @overload
    def complete(self, job: Sequence[Job], *, result: Any = None,
                 strict: bool = False) -> list[Job]: ...

    def complete(self, job: Union[Job, Sequence[Job]], *, result: Any = None,
                 strict: bool = False) -> Union[bool, list[Job]]:
        """Completes a job (`result`, any JSON value, stored with it) and returns whether its
        lease held; or completes many (`POST /api/v1/queues/{q}/complete`, a request per queue
        and per 1,000) and returns those completed (the others are marked `lost`; `strict`
        raises LeaseLost for the first)."""
        if isinstance(job, Job):
            body: dict[str, Any] = {}
            if result is not None:
                check.payload(result)
                body["result"] = result
            return self._fenced(job, "complete", body, strict)[0]
        if result is not None:
            raise InvalidOption("a result goes with one job's completion, not a batch's")
        jobs = list(job)
        done: list[Job] = []
        by_queue: dict[str, list[Job]] = {}
        for j in jobs:
            by_queue.setdefault(check.name("queue name", j.queue), []).append(j)
        for queue, held in by_queue.items():
            for at in range(0, len(held), MAX_COMPLETE):
                part = held[at:at + MAX_COMPLETE]
                refs = [{"id": j.id, "token": str(j.token)} for j in part]
                out = self.request("POST", f"/api/v1/queues/{queue}/complete", {"jobs": refs})
                completed = set(out["completed"])
                for j in part:
                    if j.id in completed:
                        done.append(j)
                    else:
                        j.lost = True
        lost = [j for j in jobs if j.lost]
        if strict and lost:
            raise LeaseLost(lost[0].id, "complete")
        return done

    def fail(self, job: Job, error: str, *, retry_at: Optional[int] = None,
             retry_in: Optional[check.Delay] = None, discard: bool = False,
             strict: bool = False) -> Outcome:
        """Records a failed attempt: retried after the queue's backoff, or at `retry_at` (µs
        since the epoch, this machine's clock) or after `retry_in` (seconds or a timedelta);
        dead when its attempts are used up, or at once with `discard`. Returns 'retry', 'dead',
        'cancelled' (an operator asked) or 'lost' (the lease was lost: nothing changed)."""
        if not isinstance(error, str):
            raise InvalidOption(f"error must be a string, not {error!r}")
        if len(error.encode()) > 64 * 1024:
            error = error.encode()[:64 * 1024].decode("utf-8", "ignore")
        if sum(x is not None for x in (retry_at, retry_in)) + discard > 1:
            raise InvalidOption("give one of retry_at, retry_in and discard")
        body: dict[str, Any] = {"error": error}
        retry_us = None
        if retry_at is not None:
            retry_us = check.instant_us(retry_at) - now_us()
        elif retry_in is not None:
            retry_us = check.delay_us(retry_in)
        if retry_us is not None:
            body["retry_in"] = _duration(max(retry_us, 1))  # the API refuses a zero retry_in
        if discard:
            body["discard"] = True
        held, out = self._fenced(job, "fail", body, strict)
        return str(out["outcome"]) if held else "lost"


def _trace(trace: Optional[str]) -> dict[str, str]:
    """The W3C headers of a checked trace context (`_validate.trace_context`'s JSON)."""
    if trace is None:
        return {}
    carrier: dict[str, str] = json.loads(trace)
    return dict(carrier)


class _Heartbeats(HeldLeases):
    """Renews the leases of the jobs a consumer holds, every third of the lease."""

    def __init__(self, client: HttpClient, lease_s: float) -> None:
        super().__init__("backlog-http-heartbeats")
        self.client, self.lease_s = client, lease_s

    def run(self) -> None:
        while not self.stop.wait(self.lease_s / 3):
            for job in self.jobs():
                try:
                    if not self.client.heartbeat(job, lease=self.lease_s):
                        self.drop(job)
                except Unauthorized as err:
                    self.error = err
                    return
                except (OSError, HttpError):
                    pass  # a server or network hiccup: the next beat tries again


class HttpConsumer:
    """Claims batches of one queue over HTTP and runs `handler(job)` for each: a return
    completes the job, an exception fails it (`Retry` chooses when it runs again; others get
    the queue's backoff). Leases (`lease`, seconds) are renewed every third of the lease while
    a job waits or runs. `on_outcome(job, outcome)` hears what became of each job: 'completed',
    'retry', 'dead', 'cancelled' or 'lost'. `stop` (a threading.Event) ends `run` after the job
    in hand."""

    def __init__(self, client: HttpClient, queue: str, handler: Callable[[Job], Any], *,
                 batch: int = 10, kinds: Optional[Sequence[str]] = None, lease: float = 30.0,
                 poll_max_s: float = 1.0, grace_s: float = 30.0,
                 on_outcome: Optional[Callable[[Job, Outcome], None]] = None) -> None:
        self.client, self.queue, self.handler = client, check.name("queue name", queue), handler
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 1000:
            raise InvalidOption(f"batch must be 1 to 1,000, not {batch!r}")
        self.batch = batch
        self.kinds = [check.name("kind", k) for k in kinds] if kinds else None
        _lease(lease)
        self.lease_s, self.poll_max_s, self.grace_s = float(lease), poll_max_s, grace_s
        self.on_outcome: Callable[[Job, Outcome], None] = on_outcome or (lambda job, o: None)
        self.stop = threading.Event()

    def run(self, *, drain: bool = False, drain_idle_s: float = 1.0,
            signals: Optional[bool] = None) -> None:
        """Works until `stop` is set, or, with `drain`, until claims have found nothing due for
        `drain_idle_s`. `signals` (default: when called on the main thread): SIGTERM and SIGINT
        set `stop`, and the job in hand gets `grace_s` seconds to finish before `run` returns
        (a job still running then is left to its lease; the rest of a batch is given back)."""
        if signals is None:
            signals = threading.current_thread() is threading.main_thread()
        previous: dict[signal.Signals, Any] = {}
        if signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda signum, frame: self.stop.set())
        beats = _Heartbeats(self.client, self.lease_s)
        beats.start()
        idle = 0.05
        empty_since: Optional[float] = None
        try:
            while not self.stop.is_set():
                if beats.error is not None:
                    raise beats.error
                try:
                    jobs = self.client.claim(self.queue, self.batch, lease=self.lease_s,
                                             kinds=self.kinds)
                except (OSError, HttpError) as err:
                    if isinstance(err, Unauthorized) or (
                            isinstance(err, HttpError) and err.status < 500):
                        raise
                    self.stop.wait(idle)  # the server restarts, or its database: try again
                    idle = min(idle * 2, self.poll_max_s)
                    continue
                if not jobs:
                    now = time.monotonic()
                    empty_since = empty_since if empty_since is not None else now
                    if drain and now - empty_since >= drain_idle_s:
                        return
                    self.stop.wait(idle)
                    idle = min(idle * 2, self.poll_max_s)
                    continue
                idle, empty_since = 0.05, None
                beats.hold(jobs)
                for i, job in enumerate(jobs):
                    if self.stop.is_set():
                        self._give_back(jobs[i:], beats)
                        break
                    finished = self._run_one(job)
                    beats.drop(job)
                    if not finished:
                        self._give_back(jobs[i + 1:], beats)
                        return
        finally:
            beats.stop.set()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _give_back(self, jobs: Sequence[Job], beats: _Heartbeats) -> None:
        """The jobs of a batch not started when the consumer stops: the worker protocol has no
        release, so each is failed with an immediate retry (its attempt counts)."""
        for job in jobs:
            beats.drop(job)
            try:
                self.client.fail(job, "not started: the consumer stopped", retry_in=0)
            except (OSError, HttpError):
                pass  # its lease runs out, and it is rescued

    def _run_one(self, job: Job) -> bool:
        """Runs the handler and reports the outcome; False when the grace period ran out
        after a stop, with the handler still running."""
        if job.lost:
            self.on_outcome(job, "lost")
            return True
        if job.cancel_requested:
            self.on_outcome(job, self.client.fail(job, "cancelled by an operator"))
            return True
        failure: list[BaseException] = []

        def call() -> None:
            try:
                self.handler(job)
            except BaseException as err:  # noqa: BLE001 - reported as the job's failure
                failure.append(err)

        runner = threading.Thread(target=call, daemon=True, name=f"backlog-job-{job.id}")
        runner.start()
        deadline: Optional[float] = None
        while runner.is_alive():
            runner.join(0.05)
            if self.stop.is_set() and deadline is None:
                deadline = time.monotonic() + self.grace_s
            if deadline is not None and time.monotonic() > deadline and runner.is_alive():
                print(f"backlog_client: job {job.id} still running after the {self.grace_s} s "
                      "grace period; left to its lease", file=sys.stderr)
                return False
        outcome: Outcome
        if failure:
            err = failure[0]
            if isinstance(err, Retry):
                outcome = self.client.fail(job, str(err), retry_in=max(err.delay_s, 0.0))
            else:
                outcome = self.client.fail(job, f"{type(err).__name__}: {err}")
        elif job.cancel_requested:
            outcome = self.client.fail(job, "cancelled by an operator")
        else:
            outcome = "completed" if self.client.complete(job) else "lost"
        self.on_outcome(job, outcome)
        return True
