"""A claimed job, the handler's way to ask for a retry, and the values a claim binds."""

from __future__ import annotations

import os
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any, Optional


def now_us() -> int:
    """This machine's clock in microseconds since the epoch. Statements bind `Client.now_us()`
    instead: this clock moved onto the database's (see README.md "Clocks")."""
    return time.time_ns() // 1000


def new_token() -> int:
    """A fresh lease token: a random non-zero signed 64-bit integer, never reused."""
    while True:
        token = secrets.randbits(64) - (1 << 63)
        if token:
            return token


def default_owner() -> str:
    """What `lease_owner` records, as the library does: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Job:
    """A claimed job. `token` fences every outcome; `lost` and `cancel_requested` are set by
    heartbeats."""

    id: int
    queue: str
    kind: Optional[str]
    payload: Any
    priority: int
    attempt: int
    max_attempts: Optional[int]
    run_at: int
    created_at: int
    token: int
    lease_expires_at: int
    lost: bool = False
    cancel_requested: bool = False
    #: The W3C trace context it was enqueued with, as stored (JSON text), or None.
    trace_context: Optional[str] = None
    #: Its ordered group, or None.
    group: Optional[str] = None


class Retry(Exception):
    """Raised by a handler to fail this attempt and run the job again no earlier than `delay_s`
    seconds from now (instead of the queue's backoff)."""

    def __init__(self, message: str, delay_s: float) -> None:
        super().__init__(message)
        self.delay_s = delay_s

