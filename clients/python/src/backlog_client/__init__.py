"""A producer and consumer of backlog queues, speaking the SQL contract of backlog's docs/sql.md
directly: no backlog process, no HTTP, only a database driver.

    import backlog_client

    client = backlog_client.connect("postgres://postgres@127.0.0.1:5432/app")
    client.enqueue("emails", {"to": "a@example.com"})

    def send(job):              # return: ack; raise: nack (retried with backoff, then dead)
        print(job.id, job.attempt, job.payload)

    backlog_client.Consumer(client, "emails", send).run()

On a connection of your own, inside your own transaction (never committed here):

    backlog_client.enqueue(conn, "emails", {"to": "a@example.com"}, delay=60)

URLs: `sqlite:///abs/path.db` (or `sqlite://relative.db`), `postgres://…` (libpq's URL, passed to
psycopg as is), `mysql://user:password@host:port/database`. Drivers: `sqlite3` from the standard
library, `psycopg` (3.x) for PostgreSQL, `pymysql` for MySQL and MariaDB; only the one a URL needs
is imported.

The statements are the library's own, copied verbatim into QUERIES from
crates/backlog-sql/queries/<dialect>/ (backlog's test suite fails when a copy and its file differ).

Over `backlog serve`'s HTTP API instead, for programs that cannot reach the database:
`backlog_client.http.HttpClient` and `HttpConsumer` (the standard library only).

Guarantees, as for any consumer of the contract: at-least-once execution (a job whose worker dies
runs again after its lease expires) and fenced outcomes (an ack, nack or heartbeat counts only
while the claim's lease token still holds the job; `ack` returns False otherwise).
"""

from __future__ import annotations

from ._async import AsyncClient, AsyncConsumer, connect_async
from ._client import QUEUE_DEFAULTS, SCHEMA_VERSION, Client, backoff_us, connect
from ._consumer import Consumer, Outcome
from ._job import Job, Retry, default_owner, new_token, now_us
from ._produce import enqueue, enqueue_many
from ._queries import QUERIES
from .errors import (
    BacklogError,
    HttpError,
    InvalidName,
    InvalidOption,
    InvalidPayload,
    LeaseLost,
    SchemaMissing,
    SchemaTooOld,
    Unauthorized,
)

__version__ = "0.20.0"

__all__ = [
    "QUERIES",
    "QUEUE_DEFAULTS",
    "SCHEMA_VERSION",
    "AsyncClient",
    "AsyncConsumer",
    "BacklogError",
    "Client",
    "Consumer",
    "HttpError",
    "InvalidName",
    "InvalidOption",
    "InvalidPayload",
    "Job",
    "LeaseLost",
    "Outcome",
    "Retry",
    "SchemaMissing",
    "SchemaTooOld",
    "Unauthorized",
    "backoff_us",
    "connect",
    "connect_async",
    "default_owner",
    "enqueue",
    "enqueue_many",
    "new_token",
    "now_us",
]
