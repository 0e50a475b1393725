# frozen_string_literal: true

module Backlog
  # The base of every error of this gem. The ones about input (InvalidPayload, InvalidName,
  # InvalidOption) are raised before anything is sent, so nothing was written. Errors of the
  # database driver itself (a lost connection) pass through unchanged.
  class Error < StandardError; end

  # The payload cannot be a job's payload: not JSON (a value JSON has no form for, NaN or
  # infinity, a string that is not UTF-8), more than 1 MiB of JSON, or holding NUL.
  class InvalidPayload < Error; end

  # A queue name or kind outside 1-128 characters of [A-Za-z0-9_.:-], or a unique or group key
  # outside 1-255 bytes or holding NUL, as backlog itself refuses them.
  class InvalidName < Error
    attr_reader :what, :value, :reason

    # `message`: the whole message, for a refusal the server explained (over HTTP).
    def initialize(what, value, reason, message: nil)
      @what, @value, @reason = what, value, reason
      shown = value.to_s.length <= 60 ? value.to_s : "#{value.to_s[0, 57]}..."
      super(message || "invalid #{what} #{shown.inspect}: #{reason}")
    end
  end

  # An option out of range: a priority outside SMALLINT, max_attempts below 1, a negative
  # delay, run_at with delay, a trace context that does not parse, an unknown option.
  class InvalidOption < Error; end

  # A fenced statement (ack, nack, heartbeat, release, cancel) refused the job's lease token:
  # the lease expired and the job was rescued, or it is gone. Nothing changed. Raised only with
  # `strict: true`; otherwise those calls return false or :lost.
  class LeaseLost < Error
    attr_reader :job_id, :operation

    def initialize(job_id, operation)
      @job_id, @operation = job_id, operation
      super("#{operation} of job #{job_id}: the lease was lost; nothing changed")
    end
  end

  # The database has no backlog schema: run `backlog migrate` against it first.
  class SchemaMissing < Error
    def initialize(message = "the database has no backlog schema (run `backlog migrate`)")
      super
    end
  end

  # The database's backlog schema is older than the version this client speaks.
  class SchemaTooOld < Error
    attr_reader :found, :needed

    def initialize(found, needed = SCHEMA_VERSION)
      @found, @needed = found, needed
      super("the backlog schema is version #{found}; this client needs version #{needed} or " \
            "later (run `backlog migrate`)")
    end
  end

  # `backlog serve` answered with an error no other class means: `status` (HTTP), `code` (the
  # API's stable error code, docs/http.md "Errors"), `job_id` if one is concerned. The typed
  # errors raised from an answer (InvalidName, LeaseLost, ...) carry it as their `cause`.
  class HttpError < Error
    attr_reader :status, :code, :job_id

    def initialize(status, code, message, job_id = nil)
      @status, @code, @job_id = status, code, job_id
      super("HTTP #{status} #{code}: #{message}")
    end
  end

  # `backlog serve` refused the token: 401 `unauthorized` or 403 `forbidden` (its scope).
  class Unauthorized < HttpError; end
end
