/**
 * The errors this package throws, all subclasses of `BacklogError`. The ones about input
 * (`InvalidPayload`, `InvalidName`, `InvalidOption`) are thrown before anything is sent to the
 * database or the server, so nothing was written. Errors of the database driver itself (a lost
 * connection, a constraint the database enforces) pass through unchanged.
 */

/** The base of every error of backlog-client. */
export class BacklogError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * The payload cannot be a job's payload: not JSON (a function, a BigInt, a cycle, NaN or
 * infinity), larger than 1 MiB of JSON, or holding `\u0000`, which PostgreSQL cannot store.
 */
export class InvalidPayload extends BacklogError {}

/**
 * A queue name or kind outside 1–128 characters of `[A-Za-z0-9_.:-]`, or a unique key or group
 * key outside 1–255 bytes (or holding NUL), as backlog itself refuses them.
 */
export class InvalidName extends BacklogError {
  /** What was named: `queue name`, `kind`, `unique key`, `group key`. */
  readonly what: string;
  /** The value refused ("" when the server refused it). */
  readonly value: string;
  constructor(what: string, value: string, reason: string, options?: { cause?: unknown }) {
    const shown = value.length <= 60 ? value : value.slice(0, 57) + "...";
    super(value === "" && options?.cause ? reason : `invalid ${what} ${JSON.stringify(shown)}: ${reason}`, options);
    this.what = what;
    this.value = value;
  }
}

/**
 * An option out of range: a priority outside SMALLINT, maxAttempts below 1, a negative delay,
 * runAt and delay together, a trace context that does not parse, an unknown option.
 */
export class InvalidOption extends BacklogError {}

/**
 * A fenced statement (complete, fail, heartbeat, release) refused the job's lease token: the
 * lease expired and the job was rescued (perhaps claimed by another worker), or it is gone.
 * Nothing changed. Thrown only with `{ strict: true }`; otherwise those calls return false or
 * `"lost"`.
 */
export class LeaseLost extends BacklogError {
  readonly jobId: number;
  readonly operation: string;
  constructor(jobId: number, operation: string, options?: { cause?: unknown }) {
    super(`${operation} of job ${jobId}: the lease was lost; nothing changed`, options);
    this.jobId = jobId;
    this.operation = operation;
  }
}

/** The database has no backlog schema: run `backlog migrate` against it first. */
export class SchemaMissing extends BacklogError {}

/** The database's schema is older than the version this client speaks. */
export class SchemaTooOld extends BacklogError {
  readonly found: number;
  readonly needed: number;
  constructor(found: number, needed: number) {
    super(
      `the backlog schema is version ${found}; this client needs version ${needed} or later ` +
        "(run `backlog migrate`)",
    );
    this.found = found;
    this.needed = needed;
  }
}

/**
 * `backlog serve` answered with an error no other class means: `status` is the HTTP status,
 * `code` the API's stable error code (docs/http.md "Errors"), `jobId` the job concerned.
 * The typed errors made from an answer carry the HttpError as their `cause`.
 */
export class HttpError extends BacklogError {
  readonly status: number;
  readonly code: string;
  readonly jobId: number | undefined;
  constructor(status: number, code: string, message: string, jobId?: number) {
    super(`HTTP ${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
    this.jobId = jobId;
  }
}

/** `backlog serve` refused the token: 401 (none, malformed, unknown) or 403 (its scope). */
export class Unauthorized extends HttpError {}
