"""The asyncio API: `AsyncClient` runs a `Client`'s calls on one thread of its own (the client's
one connection lives there, as sqlite3 requires), so they never block the event loop, and
`AsyncConsumer` runs an `async def` handler per claimed job. The database work is the sync
client's, statement for statement; only the waiting is asynchronous."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time
from typing import Any, Awaitable, Callable, Iterable, Mapping, Optional, Sequence, TypeVar

from ._client import RESCUE_EVERY_S, Client
from ._consumer import Outcome
from ._job import Job, Retry, default_owner
from ._validate import Delay, Instant, TraceContext

T = TypeVar("T")


class AsyncClient:
    """One connection and the contract's operations as awaitables. Make it with
    `await connect_async(url)`; close it with `await client.close()` (or `async with`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="backlog")
        self._client: Optional[Client] = None

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, functools.partial(fn, *args, **kwargs))

    @property
    def client(self) -> Client:
        """The sync client underneath (its methods must run on this client's thread)."""
        if self._client is None:
            raise RuntimeError("AsyncClient is not open: use `await connect_async(url)`")
        return self._client

    async def open(self) -> AsyncClient:
        """Connects (on the client's thread) and checks the schema, as `connect` does."""
        if self._client is None:
            self._client = await self._call(Client, self.url)
        return self

    async def close(self) -> None:
        """Closes the connection and stops the client's thread."""
        if self._client is not None:
            await self._call(self._client.close)
            self._client = None
        self._thread.shutdown(wait=False)

    async def __aenter__(self) -> AsyncClient:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def enqueue(self, queue: str, payload: Any, *, priority: Optional[int] = None,
                      run_at: Optional[Instant] = None, delay: Optional[Delay] = None,
                      max_attempts: Optional[int] = None, unique_key: Optional[str] = None,
                      kind: Optional[str] = None, group: Optional[str] = None,
                      trace_context: Optional[TraceContext] = None) -> int:
        """`Client.enqueue`."""
        return await self._call(self.client.enqueue, queue, payload, priority=priority,
                                run_at=run_at, delay=delay, max_attempts=max_attempts,
                                unique_key=unique_key, kind=kind, group=group,
                                trace_context=trace_context)

    async def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """`Client.enqueue_many`."""
        return await self._call(self.client.enqueue_many, list(jobs))

    async def claim(self, queue: str, limit: int, *, owner: Optional[str] = None,
                    lease_ms: Optional[int] = None, kinds: Optional[Sequence[str]] = None,
                    settings: Optional[dict[str, Any]] = None) -> list[Job]:
        """`Client.claim`."""
        return await self._call(self.client.claim, queue, limit, owner=owner, lease_ms=lease_ms,
                                kinds=kinds, settings=settings)

    async def ack(self, job: Job, *, retention: Optional[str] = None,
                  strict: bool = False) -> bool:
        """`Client.ack`."""
        return await self._call(self.client.ack, job, retention=retention, strict=strict)

    async def nack(self, job: Job, error: str, *, retry_at: Optional[int] = None,
                   settings: Optional[dict[str, Any]] = None, strict: bool = False) -> str:
        """`Client.nack`."""
        return await self._call(self.client.nack, job, error, retry_at=retry_at,
                                settings=settings, strict=strict)

    async def cancelled(self, job: Job, reason: str = "cancelled", *,
                        strict: bool = False) -> bool:
        """`Client.cancelled`."""
        return await self._call(self.client.cancelled, job, reason, strict=strict)

    async def heartbeat(self, job: Job, *, lease_ms: Optional[int] = None,
                        strict: bool = False) -> bool:
        """`Client.heartbeat`."""
        return await self._call(self.client.heartbeat, job, lease_ms=lease_ms, strict=strict)

    async def release(self, job: Job, run_at: Optional[int] = None, *,
                      strict: bool = False) -> bool:
        """`Client.release`."""
        return await self._call(self.client.release, job, run_at, strict=strict)

    async def rescue(self) -> int:
        """`Client.rescue`."""
        return await self._call(self.client.rescue)

    async def queue_settings(self, queue: str) -> dict[str, Any]:
        """`Client.queue_settings`."""
        return await self._call(self.client.queue_settings, queue)

    async def pending(self, queue: str) -> int:
        """`Client.pending`."""
        return await self._call(self.client.pending, queue)

    async def now_us(self) -> int:
        """`Client.now_us`."""
        return await self._call(self.client.now_us)


async def connect_async(url: str) -> AsyncClient:
    """Opens an `AsyncClient`: one connection, on a thread of its own, schema checked."""
    return await AsyncClient(url).open()


class AsyncConsumer:
    """`Consumer` for an `async def handler(job)`: a return acks the job, an exception nacks it
    (`Retry` chooses when it runs again). The leases of the batch in hand are renewed every third
    of the lease on a second connection; `stop()` ends `run` after the job in hand, giving the
    rest of the batch back."""

    def __init__(self, client: AsyncClient, queue: str,
                 handler: Callable[[Job], Awaitable[Any]], *, batch: int = 10,
                 kinds: Optional[Sequence[str]] = None, owner: Optional[str] = None,
                 lease_ms: Optional[int] = None, poll_max_s: float = 1.0,
                 on_outcome: Optional[Callable[[Job, Outcome], None]] = None) -> None:
        self.client, self.queue, self.handler = client, queue, handler
        self.batch, self.kinds, self.owner = batch, kinds, owner or default_owner()
        self.lease_ms, self.poll_max_s = lease_ms, poll_max_s
        self.on_outcome: Callable[[Job, Outcome], None] = on_outcome or (lambda job, out: None)
        self._stopping = False
        self._stop: Optional[asyncio.Event] = None  # made in `run`, on its loop
        self._held: dict[int, Job] = {}

    def stop(self) -> None:
        """Asks `run` to end after the job in hand."""
        self._stopping = True
        if self._stop is not None:
            self._stop.set()

    async def _heartbeats(self, lease_ms: int) -> None:
        async with AsyncClient(self.client.url) as beats:
            while True:
                await asyncio.sleep(lease_ms / 3000)
                for job in list(self._held.values()):
                    if not await beats.heartbeat(job, lease_ms=lease_ms):
                        self._held.pop(job.id, None)

    async def run(self, *, drain: bool = False) -> None:
        """Works until `stop()`, or, with `drain`, until the queue has no job available (due or
        not) or running."""
        stop = self._stop = asyncio.Event()
        if self._stopping:
            stop.set()
        settings = await self.client.queue_settings(self.queue)
        lease_ms = self.lease_ms or int(settings["lease_ms"])
        beats = asyncio.ensure_future(self._heartbeats(lease_ms))
        idle, last_rescue = 0.05, 0.0
        try:
            while not stop.is_set():
                if beats.done():
                    beats.result()  # raises what stopped the heartbeats
                if time.monotonic() - last_rescue >= RESCUE_EVERY_S:
                    last_rescue = time.monotonic()
                    await self.client.rescue()
                jobs = await self.client.claim(self.queue, self.batch, owner=self.owner,
                                               lease_ms=lease_ms, kinds=self.kinds,
                                               settings=settings)
                if not jobs:
                    if drain and await self.client.pending(self.queue) == 0:
                        return
                    try:
                        await asyncio.wait_for(stop.wait(), idle)
                    except asyncio.TimeoutError:
                        pass
                    idle = min(idle * 2, self.poll_max_s)
                    continue
                idle = 0.05
                self._held.update((j.id, j) for j in jobs)
                for i, job in enumerate(jobs):
                    if stop.is_set():
                        for rest in jobs[i:]:
                            self._held.pop(rest.id, None)
                            await self.client.release(rest)
                        break
                    await self._run_one(job, settings)
                    self._held.pop(job.id, None)
        finally:
            beats.cancel()
            try:
                await beats
            except (asyncio.CancelledError, Exception):
                pass

    async def _run_one(self, job: Job, settings: dict[str, Any]) -> None:
        if job.lost:
            self.on_outcome(job, "lost")
            return
        c = self.client
        try:
            if not job.cancel_requested:
                await self.handler(job)
        except Retry as r:
            retry_at = await c.now_us() + int(r.delay_s * 1_000_000)
            outcome: Outcome = await c.nack(job, str(r), retry_at=retry_at, settings=settings)
        except Exception as err:  # noqa: BLE001 - a failed attempt, recorded on the job
            outcome = await c.nack(job, f"{type(err).__name__}: {err}", settings=settings)
        else:
            if job.cancel_requested:
                outcome = "cancelled" if await c.cancelled(job) else "lost"
            else:
                held = await c.ack(job, retention=str(settings["retention"]))
                outcome = "completed" if held else "lost"
        self.on_outcome(job, outcome)
