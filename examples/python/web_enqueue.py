"""Transactional enqueue from a web request, with no web framework (the standard library's
wsgiref): `POST /orders` with a JSON body writes the order's own row and enqueues its `ship` job
on the same connection, in the same transaction. Both commit together, or neither does: a job
never exists for an order that was rolled back, and no committed order lacks its job.

    backlog migrate                              # BACKLOG_DATABASE_URL=sqlite://shop.db
    pip install ./clients/python                 # or: PYTHONPATH=clients/python/src
    python3 examples/python/web_enqueue.py sqlite://shop.db --port 8000
    curl -d '{"item": "book", "quantity": 2}' http://127.0.0.1:8000/orders
    backlog work orders -- sh -c 'cat; echo'     # ships it

The same code runs on PostgreSQL (psycopg) and MySQL/MariaDB (PyMySQL) URLs: the application
opens its own connections, as it would for its own tables; backlog_client only adds its INSERT.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import urllib.parse
import uuid
from typing import Any, Callable, Iterable
from wsgiref.simple_server import make_server

import backlog_client


def open_connection(url: str) -> Any:
    """The application's own connection, with the driver it already uses (not autocommit)."""
    if url.startswith("sqlite://"):
        return sqlite3.connect(url[len("sqlite://"):], timeout=30.0)
    if url.startswith(("postgres://", "postgresql://")):
        import psycopg

        return psycopg.connect(url)
    if url.startswith(("mysql://", "mariadb://")):
        import pymysql

        u = urllib.parse.urlsplit(url)
        return pymysql.connect(host=u.hostname or "127.0.0.1", port=u.port or 3306,
                               user=urllib.parse.unquote(u.username or "root"),
                               password=urllib.parse.unquote(u.password or ""),
                               database=u.path.lstrip("/"), charset="utf8mb4")
    raise SystemExit(f"expected sqlite://, postgres:// or mysql://, not {url!r}")


def create_tables(url: str) -> None:
    conn = open_connection(url)
    try:
        conn.cursor().execute("CREATE TABLE IF NOT EXISTS shop_order"
                              " (id VARCHAR(64) PRIMARY KEY, item VARCHAR(255) NOT NULL,"
                              " quantity INT NOT NULL)")
        conn.commit()
    finally:
        conn.close()


def make_app(url: str) -> Callable[..., Iterable[bytes]]:
    """The WSGI application: one connection per request, one transaction per order."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def reply(status: str, body: Any) -> Iterable[bytes]:
            start_response(status, [("Content-Type", "application/json")])
            return [json.dumps(body).encode() + b"\n"]

        if environ["PATH_INFO"] != "/orders" or environ["REQUEST_METHOD"] != "POST":
            return reply("404 Not Found", {"error": "POST /orders"})
        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
            order = json.loads(environ["wsgi.input"].read(size))
            item, quantity = str(order["item"]), int(order["quantity"])
        except (ValueError, KeyError, TypeError) as err:
            return reply("400 Bad Request", {"error": f"expected {{item, quantity}}: {err}"})
        order_id = uuid.uuid4().hex
        conn = open_connection(url)
        try:
            mark = "?" if isinstance(conn, sqlite3.Connection) else "%s"
            conn.cursor().execute(
                f"INSERT INTO shop_order (id, item, quantity) VALUES ({mark}, {mark}, {mark})",
                (order_id, item, quantity))
            job = backlog_client.enqueue(conn, "orders", {"order": order_id, "item": item},
                                         kind="ship", unique_key=f"ship:{order_id}")
            if quantity <= 0:  # a rule checked late: the rollback takes the job with the row
                conn.rollback()
                return reply("422 Unprocessable Entity", {"error": "quantity must be positive"})
            conn.commit()  # the order and its job, together
        except backlog_client.BacklogError as err:
            conn.rollback()
            return reply("400 Bad Request", {"error": str(err)})
        finally:
            conn.close()
        return reply("201 Created", {"order": order_id, "job": job})

    return app


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("url", help="the application's (and backlog's) database")
    p.add_argument("--port", type=int, default=8000)
    a = p.parse_args()
    create_tables(a.url)
    with make_server("127.0.0.1", a.port, make_app(a.url)) as server:
        print(f"POST http://127.0.0.1:{a.port}/orders", file=sys.stderr)
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
