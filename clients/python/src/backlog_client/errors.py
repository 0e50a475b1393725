"""The errors this package raises, all subclasses of `BacklogError`. The ones about input
(`InvalidPayload`, `InvalidName`, `InvalidOption`) are raised before anything is sent to the
database, so nothing was written. Errors of the database driver itself (a lost connection, a
constraint the database enforces) pass through unchanged."""

from __future__ import annotations


class BacklogError(Exception):
    """The base of every error of backlog_client."""


class InvalidPayload(BacklogError, ValueError):
    """The payload cannot be a job's payload: not JSON-serialisable (or NaN, infinity), larger than
    the limit, or holding a NUL character, which PostgreSQL cannot store."""


class InvalidName(BacklogError, ValueError):
    """A queue name or kind outside 1–128 characters of `[A-Za-z0-9_.:-]`, or a unique key or
    group key outside 1–255 bytes (or holding NUL), as backlog itself refuses them."""

    def __init__(self, what: str, value: str, reason: str) -> None:
        shown = value if len(value) <= 60 else value[:57] + "..."
        super().__init__(f"invalid {what} {shown!r}: {reason}")
        self.what, self.value, self.reason = what, value, reason


class InvalidOption(BacklogError, ValueError):
    """An option out of range: a priority outside SMALLINT, max_attempts below 1, a delay that is
    negative, a naive datetime, a trace context that does not parse, and the like."""


class LeaseLost(BacklogError):
    """A fenced statement (ack, nack, heartbeat, release) refused the job's lease token: the lease
    expired and the job was rescued (perhaps claimed by another worker), or it is gone. Nothing
    changed. Raised only with `strict=True`; otherwise those calls return False or 'lost'."""

    def __init__(self, job_id: int, operation: str) -> None:
        super().__init__(f"{operation} of job {job_id}: the lease was lost; nothing changed")
        self.job_id, self.operation = job_id, operation


class SchemaMissing(BacklogError):
    """The database has no backlog schema: run `backlog migrate` against it first."""


class SchemaTooOld(BacklogError):
    """The database's backlog schema is older than the version this client speaks: run a newer
    `backlog migrate` against it."""

    def __init__(self, found: int, needed: int) -> None:
        super().__init__(
            f"the backlog schema is version {found}; this client needs version {needed} or later "
            "(run `backlog migrate`)"
        )
        self.found, self.needed = found, needed
