"""The errors this package raises, all subclasses of `BacklogError`. The ones about input
(`InvalidPayload`, `InvalidName`, `InvalidOption`) are raised before anything is sent to the
database, so nothing was written. Errors of the database driver itself (a lost connection, a
constraint the database enforces) pass through unchanged."""

from __future__ import annotations

from typing import Optional


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

    @classmethod
    def refused(cls, what: str, message: str) -> InvalidName:
        """The server refused a name (over HTTP): its message, the value unknown here."""
        err = cls.__new__(cls)
        Exception.__init__(err, message)
        err.what, err.value, err.reason = what, "", message
        return err


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


class HttpError(BacklogError):
    """`backlog serve` answered with an error that no other class of this module means: `status`
    is the HTTP status, `code` the API's stable error code (docs/http.md "Errors"), `job_id` the
    job concerned, if one is. The typed errors raised from an answer (InvalidName, LeaseLost, …)
    carry the HttpError they come from as their `__cause__`."""

    def __init__(self, status: int, code: str, message: str,
                 job_id: Optional[int] = None) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status, self.code, self.message, self.job_id = status, code, message, job_id


class Unauthorized(HttpError):
    """`backlog serve` refused the token: 401 `unauthorized` (none, malformed or unknown) or 403
    `forbidden` (its scope does not allow the call: a worker needs `produce` or `admin`)."""
