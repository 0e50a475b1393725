"""Checks of what a producer passes, mirroring backlog's own (crates/backlog-core, validate.rs
and trace.rs) with the same limits, so a job this client writes is one backlog can list, claim
and administer. Everything is checked before a statement is sent."""

from __future__ import annotations

import datetime
import json
import re
from typing import Any, Mapping, Optional, Union

from .errors import InvalidName, InvalidOption, InvalidPayload

#: Longest queue name or kind, in bytes (backlog_core::MAX_NAME_LEN).
MAX_NAME_LEN = 128
#: Longest unique key or group key, in bytes (backlog_core::MAX_UNIQUE_KEY_LEN).
MAX_KEY_LEN = 255
#: Largest payload, in bytes of JSON (backlog_core::DEFAULT_PAYLOAD_LIMIT).
PAYLOAD_LIMIT = 1024 * 1024
#: Longest `tracestate`, in bytes (backlog_core::MAX_TRACESTATE_LEN).
MAX_TRACESTATE_LEN = 512
SMALLINT = (-32768, 32767)
INT_MAX = 2**31 - 1

#: json.dumps(value, allow_nan=False, separators=(",", ":")), without making an encoder a call.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
_NAME = re.compile(r"[A-Za-z0-9_.:-]+")
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")

#: A time: microseconds since the epoch, or an aware datetime.
Instant = Union[int, datetime.datetime]
#: A delay: seconds, or a timedelta.
Delay = Union[int, float, datetime.timedelta]
#: A W3C trace context: the traceparent, or {"traceparent": …, "tracestate": …}.
TraceContext = Union[str, Mapping[str, Optional[str]]]


def name(what: str, value: object) -> str:
    """A queue name or kind: 1 to 128 characters of `[A-Za-z0-9_.:-]`."""
    if not isinstance(value, str):
        raise InvalidName(what, repr(value), "must be a string")
    if not value:
        raise InvalidName(what, value, "must not be empty")
    if len(value.encode()) > MAX_NAME_LEN:
        raise InvalidName(what, value, "must be at most 128 characters")
    if not _NAME.fullmatch(value) or not value.isascii():
        raise InvalidName(what, value, "only letters, digits and _ - . : are allowed")
    return value


def key(what: str, value: object) -> str:
    """A unique key or group key: 1 to 255 bytes, any characters but NUL."""
    if not isinstance(value, str):
        raise InvalidName(what, repr(value), "must be a string")
    if not value:
        raise InvalidName(what, value, "must not be empty")
    if len(value.encode()) > MAX_KEY_LEN:
        raise InvalidName(what, value, "must be at most 255 bytes")
    if "\0" in value:
        raise InvalidName(what, value, "must not contain NUL")
    return value


def payload(value: Any) -> str:
    """The payload as JSON text: valid JSON (no NaN or infinity), at most 1 MiB, no NUL."""
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as err:
        raise InvalidPayload(f"the payload is not JSON: {err}") from None
    if len(text.encode()) > PAYLOAD_LIMIT:
        raise InvalidPayload(
            f"the payload is {len(text.encode())} bytes of JSON; the limit is {PAYLOAD_LIMIT}"
        )
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise InvalidPayload("\\u0000 is not allowed in payloads")
    return text


def _int(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOption(f"{what} must be an integer, not {value!r}")
    return value


def priority(value: object) -> int:
    """A priority: SMALLINT, lower runs first."""
    p = _int("priority", value)
    if not SMALLINT[0] <= p <= SMALLINT[1]:
        raise InvalidOption(f"priority must be between -32768 and 32767, not {p}")
    return p


def max_attempts(value: object) -> int:
    """A job's own attempt limit: 1 to 2^31 - 1."""
    m = _int("max_attempts", value)
    if not 1 <= m <= INT_MAX:
        raise InvalidOption(f"max_attempts must be between 1 and {INT_MAX}, not {m}")
    return m


def instant_us(value: object) -> int:
    """`run_at` in microseconds since the epoch: an int as it is, or an aware datetime."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidOption("run_at must be an aware datetime (with a tzinfo), not naive")
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return (value - epoch) // datetime.timedelta(microseconds=1)
    us = _int("run_at", value)
    if not 0 <= us < 2**63:
        raise InvalidOption(f"run_at must be microseconds since the epoch, not {us}")
    return us


def delay_us(value: object) -> int:
    """A delay in microseconds: seconds (int or float) or a timedelta, not negative."""
    if isinstance(value, datetime.timedelta):
        us = value // datetime.timedelta(microseconds=1)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidOption(f"delay must be a finite number of seconds, not {value!r}")
        us = int(value * 1_000_000)
    else:
        raise InvalidOption(f"delay must be seconds or a timedelta, not {value!r}")
    if us < 0:
        raise InvalidOption(f"delay must not be negative, not {value!r}")
    return us


def _hex(s: str, length: int) -> bool:
    return len(s) == length and all(c in "0123456789abcdef" for c in s)


def trace_context(value: object) -> str:
    """A W3C trace context as the `trace_context` column stores it, `{"traceparent": …,
    "tracestate": …}` (backlog_core::TraceContext, the same checks)."""
    if isinstance(value, str):
        traceparent, tracestate = value, None
    elif isinstance(value, Mapping):
        unknown = set(value) - {"traceparent", "tracestate"}
        if unknown:
            raise InvalidOption(f"trace_context has unknown keys {sorted(unknown)}")
        parent, tracestate = value.get("traceparent"), value.get("tracestate")
        if not isinstance(parent, str):
            raise InvalidOption("trace_context needs a traceparent string")
        if tracestate is not None and not isinstance(tracestate, str):
            raise InvalidOption("tracestate must be a string")
        traceparent = parent
    else:
        raise InvalidOption(f"trace_context must be a traceparent or a mapping, not {value!r}")
    fields = traceparent.strip().split("-", 4)
    if len(fields) < 4:
        raise InvalidOption(
            "traceparent must be 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"
        )
    version, trace_id, parent_id, flags = fields[:4]
    if not _hex(version, 2) or version == "ff":
        raise InvalidOption("traceparent version must be two lower-case hex digits, not ff")
    if version == "00" and len(fields) > 4:
        raise InvalidOption("a version 00 traceparent has exactly four fields")
    if not _hex(trace_id, 32) or set(trace_id) == {"0"}:
        raise InvalidOption("trace id must be 32 lower-case hex digits, not all zero")
    if not _hex(parent_id, 16) or set(parent_id) == {"0"}:
        raise InvalidOption("parent id must be 16 lower-case hex digits, not all zero")
    if not _hex(flags, 2):
        raise InvalidOption("trace flags must be two lower-case hex digits")
    carrier = {"traceparent": f"00-{trace_id}-{parent_id}-{flags}"}
    state = None if tracestate is None else tracestate.strip()
    if state:
        if len(state.encode()) > MAX_TRACESTATE_LEN:
            raise InvalidOption("tracestate must be at most 512 bytes")
        if not all(0x20 <= ord(c) < 0x7F for c in state):
            raise InvalidOption("tracestate must be printable ASCII")
        carrier["tracestate"] = state
    return json.dumps(carrier, separators=(",", ":"))
