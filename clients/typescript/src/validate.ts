/**
 * Checks of what a producer passes, mirroring backlog's own (crates/backlog-core, validate.rs
 * and trace.rs) with the same limits, so a job this client writes is one backlog can list,
 * claim and administer. Everything is checked before a statement or request is sent.
 */
import { InvalidName, InvalidOption, InvalidPayload } from "./errors.js";

/** Longest queue name or kind, in bytes. */
export const MAX_NAME_LEN = 128;
/** Longest unique key or group key, in bytes. */
export const MAX_KEY_LEN = 255;
/** Largest payload, in bytes of JSON. */
export const PAYLOAD_LIMIT = 1024 * 1024;
/** Longest `tracestate`, in bytes. */
export const MAX_TRACESTATE_LEN = 512;
const INT_MAX = 2 ** 31 - 1;

/** A W3C trace context: the traceparent, or `{ traceparent, tracestate }`. */
export type TraceContext = string | { traceparent: string; tracestate?: string | null };

const NAME = /^[A-Za-z0-9_.:-]+$/;
const bytes = (s: string): number => Buffer.byteLength(s, "utf8");

/** Names checked already (a batch names its queue a thousand times). */
const goodNames = new Set<string>();

/** A queue name or kind: 1 to 128 characters of `[A-Za-z0-9_.:-]`. */
export function name(what: string, value: unknown): string {
  if (typeof value === "string" && goodNames.has(value)) return value;
  if (typeof value !== "string") throw new InvalidName(what, String(value), "must be a string");
  if (value === "") throw new InvalidName(what, value, "must not be empty");
  if (bytes(value) > MAX_NAME_LEN) throw new InvalidName(what, value, "must be at most 128 characters");
  if (!NAME.test(value)) throw new InvalidName(what, value, "only letters, digits and _ - . : are allowed");
  if (goodNames.size < 1024) goodNames.add(value);
  return value;
}

/** A unique key or group key: 1 to 255 bytes, any characters but NUL. */
export function key(what: string, value: unknown): string {
  if (typeof value !== "string") throw new InvalidName(what, String(value), "must be a string");
  if (value === "") throw new InvalidName(what, value, "must not be empty");
  if (bytes(value) > MAX_KEY_LEN) throw new InvalidName(what, value, "must be at most 255 bytes");
  if (value.includes("\0")) throw new InvalidName(what, value, "must not contain NUL");
  return value;
}

/** Whether a value is JSON as it is: no value JSON.stringify would drop or turn into null. */
function plainJson(value: unknown, seen: Set<object>): string | null {
  switch (typeof value) {
    case "string":
    case "boolean":
      return null;
    case "number":
      return Number.isFinite(value) ? null : `${value} is not a JSON number`;
    case "object": {
      if (value === null) return null;
      if (seen.has(value)) return "it holds a cycle";
      seen.add(value);
      try {
        if (Array.isArray(value)) {
          for (const v of value) {
            const why = plainJson(v, seen);
            if (why) return why;
          }
          return null;
        }
        const proto = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null) {
          return `a ${value.constructor?.name ?? "class instance"} is not a plain object`;
        }
        for (const k in value) {
          const why = plainJson((value as Record<string, unknown>)[k], seen);
          if (why) return why;
        }
        return null;
      } finally {
        seen.delete(value);
      }
    }
    default:
      return `a ${typeof value} is not JSON`;
  }
}

/** The payload as JSON text: plain JSON values only, at most 1 MiB, no `\u0000`. */
export function payload(value: unknown, what = "payload"): string {
  const why = plainJson(value, new Set());
  if (why) throw new InvalidPayload(`the ${what} is not JSON: ${why}`);
  const text = JSON.stringify(value);
  // Bytes only when they could pass the limit: a UTF-16 unit is at most 3 bytes of UTF-8.
  if (text.length * 3 > PAYLOAD_LIMIT && bytes(text) > PAYLOAD_LIMIT) {
    throw new InvalidPayload(`the ${what} is ${bytes(text)} bytes of JSON; the limit is ${PAYLOAD_LIMIT}`);
  }
  if (text.includes("\\u0000") && /(?<!\\)(?:\\\\)*\\u0000/.test(text)) {
    throw new InvalidPayload(`\\u0000 is not allowed in a ${what}`);
  }
  return text;
}

function int(what: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value)) {
    throw new InvalidOption(`${what} must be an integer, not ${String(value)}`);
  }
  return value;
}

/** A priority: SMALLINT, lower runs first. */
export function priority(value: unknown): number {
  const p = int("priority", value);
  if (p < -32768 || p > 32767) throw new InvalidOption(`priority must be between -32768 and 32767, not ${p}`);
  return p;
}

/** A job's own attempt limit: 1 to 2^31 - 1. */
export function maxAttempts(value: unknown): number {
  const m = int("maxAttempts", value);
  if (m < 1 || m > INT_MAX) throw new InvalidOption(`maxAttempts must be between 1 and ${INT_MAX}, not ${m}`);
  return m;
}

/** `runAt` in microseconds since the epoch: a number of µs as it is, or a Date. */
export function instantUs(value: unknown): number {
  if (value instanceof Date) {
    const ms = value.getTime();
    if (Number.isNaN(ms)) throw new InvalidOption("runAt is an invalid Date");
    return ms * 1000;
  }
  const us = int("runAt", value);
  if (us < 0) throw new InvalidOption(`runAt must be microseconds since the epoch, not ${us}`);
  return us;
}

/** A delay in microseconds, from seconds (a finite number, not negative). */
export function delayUs(value: unknown, what = "delay"): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new InvalidOption(`${what} must be a finite number of seconds, not ${String(value)}`);
  }
  if (value < 0) throw new InvalidOption(`${what} must not be negative, not ${value}`);
  return Math.round(value * 1_000_000);
}

const hex = (s: string, n: number): boolean => s.length === n && /^[0-9a-f]+$/.test(s);

/** A W3C trace context as the `trace_context` column stores it: `{"traceparent":…,"tracestate":…}`. */
export function traceContext(value: unknown): string {
  let parent: unknown;
  let state: unknown = null;
  if (typeof value === "string") {
    parent = value;
  } else if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const unknown = Object.keys(value).filter((k) => k !== "traceparent" && k !== "tracestate");
    if (unknown.length) throw new InvalidOption(`traceContext has unknown keys ${unknown.join(", ")}`);
    parent = (value as Record<string, unknown>).traceparent;
    state = (value as Record<string, unknown>).tracestate ?? null;
    if (state !== null && typeof state !== "string") throw new InvalidOption("tracestate must be a string");
  } else {
    throw new InvalidOption(`traceContext must be a traceparent or an object, not ${String(value)}`);
  }
  if (typeof parent !== "string") throw new InvalidOption("traceContext needs a traceparent string");
  const fields = parent.trim().split("-");
  if (fields.length < 4) {
    throw new InvalidOption("traceparent must be 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>");
  }
  const [version, traceId, parentId, flags] = fields as [string, string, string, string];
  if (!hex(version, 2) || version === "ff") throw new InvalidOption("traceparent version must be two lower-case hex digits, not ff");
  if (version === "00" && fields.length > 4) throw new InvalidOption("a version 00 traceparent has exactly four fields");
  if (!hex(traceId, 32) || /^0+$/.test(traceId)) throw new InvalidOption("trace id must be 32 lower-case hex digits, not all zero");
  if (!hex(parentId, 16) || /^0+$/.test(parentId)) throw new InvalidOption("parent id must be 16 lower-case hex digits, not all zero");
  if (!hex(flags, 2)) throw new InvalidOption("trace flags must be two lower-case hex digits");
  const carrier: Record<string, string> = { traceparent: `00-${traceId}-${parentId}-${flags}` };
  const s = typeof state === "string" ? state.trim() : "";
  if (s) {
    if (bytes(s) > MAX_TRACESTATE_LEN) throw new InvalidOption("tracestate must be at most 512 bytes");
    if (!/^[\x20-\x7e]*$/.test(s)) throw new InvalidOption("tracestate must be printable ASCII");
    carrier.tracestate = s;
  }
  return JSON.stringify(carrier);
}
