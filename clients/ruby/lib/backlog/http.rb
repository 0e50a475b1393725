# frozen_string_literal: true

require "json"
require "net/http"
require "uri"
require_relative "../backlog"

module Backlog
  # `backlog serve`'s API and worker protocol (docs/http.md) with the standard library's
  # Net::HTTP, for programs that cannot reach the database. Give it a `produce` token
  # (`backlog token new NAME --scope produce`). Input is checked as the SQL producer checks it,
  # before any request; the server's refusals are typed too (`queue_name_invalid` ->
  # InvalidName, ..., with the HttpError as `cause`). Safe to share between threads (a
  # connection per request).
  #
  #   client = Backlog::HttpClient.new("http://127.0.0.1:8080", token: ENV["BACKLOG_TOKEN"])
  #   client.enqueue("emails", { "to" => "a@example.com" }, delay: 60)
  #   Backlog::HttpWorker.new(client, "emails") { |job| deliver(job.payload) }.run
  class HttpClient
    # Error codes of the API that mean a name was refused, and which name.
    NAME_CODES = {
      "queue_name_invalid" => "queue name", "kind_invalid" => "kind",
      "unique_key_invalid" => "unique key", "group_key_invalid" => "group key"
    }.freeze
    PAYLOAD_CODES = %w[payload_invalid payload_too_large].freeze
    OPTION_CODES = %w[duration_invalid option_invalid value_out_of_range batch_size_invalid
                      token_invalid worker_invalid error_too_long trace_context_invalid].freeze
    # Most jobs one batch enqueue takes, and one batch completion.
    MAX_BATCH = 10_000
    MAX_COMPLETE = 1_000

    attr_reader :base_url, :worker, :requests

    # `token`: sent as `Authorization: Bearer TOKEN`. `timeout`: seconds per request.
    # `worker`: the name claims record as the lease owner (default host:pid).
    def initialize(base_url, token: nil, timeout: 30, worker: nil)
      uri = URI.parse(base_url)
      raise InvalidOption, "base_url must be an http:// or https:// URL, not #{base_url.inspect}" unless %w[http https].include?(uri.scheme) && uri.host

      @base_url = base_url.chomp("/")
      @token, @timeout = token, timeout
      @worker = worker || Backlog.default_owner
      @requests = 0
      @lock = Mutex.new
    end

    # Sends one request; returns its JSON answer (nil when empty) or raises what an error
    # answer means.
    def request(method, path, body = nil, headers: {})
      uri = URI.parse(@base_url + path)
      req = Net::HTTPGenericRequest.new(method, !body.nil?, true, uri.request_uri,
                                        { "Accept" => "application/json" }.merge(headers))
      unless body.nil?
        req["Content-Type"] = "application/json"
        req.body = body.is_a?(String) ? body : JSON.generate(body)
      end
      req["Authorization"] = "Bearer #{@token}" if @token
      @lock.synchronize { @requests += 1 }
      res = Net::HTTP.start(uri.host, uri.port, use_ssl: uri.scheme == "https",
                                                open_timeout: @timeout, read_timeout: @timeout) { |h| h.request(req) }
      raw = res.body.to_s
      return raw.empty? ? nil : JSON.parse(raw) if res.code.to_i < 300

      err, cause = HttpClient.error_of(res.code.to_i, raw)
      raise err, cause: cause
    end

    # The error an answer with this status and body means (docs/http.md "Errors"), and the
    # HttpError it comes from when it is a typed one (its `cause`).
    def self.error_of(status, body)
      code, message, job_id = "http_error", body[0, 500], nil
      begin
        e = JSON.parse(body)["error"]
        code, message, job_id = e["code"].to_s, e["message"].to_s, e["job_id"]
      rescue StandardError
        nil
      end
      job_id = nil unless job_id.is_a?(Integer)
      return [Unauthorized.new(status, code, message), nil] if [401, 403].include?(status)

      cause = HttpError.new(status, code, message, job_id)
      typed = if NAME_CODES.key?(code) then InvalidName.new(NAME_CODES[code], "", message, message: message)
              elsif PAYLOAD_CODES.include?(code) then InvalidPayload.new(message)
              elsif OPTION_CODES.include?(code) then InvalidOption.new(message)
              elsif code == "lease_lost" && job_id then LeaseLost.new(job_id, "request")
              end
      typed ? [typed, cause] : [cause, nil]
    end

    # The token's name and scope (GET /api/v1/me).
    def me = request("GET", "/api/v1/me")

    # ---- producer

    # Enqueues one job (POST /api/v1/jobs) with the options of Backlog.enqueue; returns its id
    # (a unique key an unfinished job holds: that job's id). `run_at` goes as a delay from this
    # machine's clock (the API takes delays).
    def enqueue(queue, payload, **opts)
      body, trace = HttpClient.checked(queue, payload, **opts)
      out = request("POST", "/api/v1/jobs", body, headers: HttpClient.trace_headers(trace))
      Integer(out["id"])
    rescue HttpError => e
      raise unless e.code == "unique_key_taken" && e.job_id

      e.job_id
    end

    # Enqueues jobs in one request (POST /api/v1/jobs/batch, up to 10,000), all or none: each
    # a Hash with :queue, :payload and options. Returns their ids in order. A batch has one
    # trace context (the request's traceparent): give it here, or the same to every job.
    def enqueue_many(jobs, trace_context: nil)
      checked = jobs.each_with_index.map do |job, i|
        raise InvalidOption, "job #{i}: expected a Hash with queue and payload, not #{job.inspect}" unless job.is_a?(Hash)

        job = job.transform_keys(&:to_sym)
        unknown = job.keys - [:queue, :payload, *Producer::OPTIONS]
        raise InvalidOption, "job #{i}: unknown options #{unknown.sort}" unless unknown.empty?
        raise InvalidOption, "job #{i}: queue and payload are required" unless job.key?(:queue) && job.key?(:payload)

        opts = job.dup
        HttpClient.checked(opts.delete(:queue), opts.delete(:payload), **opts)
      end
      raise InvalidOption, "a batch holds 1 to #{MAX_BATCH} jobs, not #{checked.length}" unless (1..MAX_BATCH).cover?(checked.length)

      traces = checked.map(&:last).uniq
      if trace_context
        traces << Validate.trace_context(trace_context)
        traces = traces.compact.uniq
      end
      raise InvalidOption, "the jobs of a batch share one trace context over HTTP" if traces.length > 1

      body = "{\"jobs\":[#{checked.map(&:first).join(',')}]}"
      out = request("POST", "/api/v1/jobs/batch", body, headers: HttpClient.trace_headers(traces[0]))
      out["jobs"].map { |j| Integer(j["id"]) }
    end

    # One job's enqueue body, checked, and its trace context (JSON text or nil).
    def self.checked(queue, payload, priority: nil, run_at: nil, delay: nil, max_attempts: nil,
                     unique_key: nil, kind: nil, group: nil, trace_context: nil)
      rest = { "queue" => Validate.name("queue name", queue) }
      text = Validate.payload(payload)
      rest["kind"] = Validate.name("kind", kind) unless kind.nil?
      rest["priority"] = Validate.priority(priority) unless priority.nil?
      raise InvalidOption, "give run_at or delay, not both" if run_at && delay

      rest["delay"] = duration(Validate.instant_us(run_at) - Session.local_us) if run_at
      rest["delay"] = duration(Validate.delay_us(delay)) if delay
      rest["max_attempts"] = Validate.max_attempts(max_attempts) unless max_attempts.nil?
      rest["unique_key"] = Validate.key("unique key", unique_key) unless unique_key.nil?
      rest["group"] = Validate.key("group key", group) unless group.nil?
      trace = trace_context.nil? ? nil : Validate.trace_context(trace_context)
      # The payload goes as the text checked, spliced in: the server stores the text sent.
      ["{\"payload\":#{text},#{JSON.generate(rest)[1..]}", trace]
    end

    def self.duration(us) = "#{[us, 0].max}us"

    def self.trace_headers(trace) = trace ? JSON.parse(trace) : {}

    def self.lease(seconds)
      return nil if seconds.nil?

      us = Validate.delay_us(seconds)
      raise InvalidOption, "a lease must be at least a millisecond, not #{seconds.inspect}" if us < 1000

      duration(us)
    end

    # ---- worker protocol

    # Claims up to `limit` (1 to 1,000) due jobs of `queue`, each with a fresh lease of `lease`
    # seconds (default: the queue's). Jobs whose `token` fences every later call.
    def claim(queue, limit = 1, lease: nil, kinds: nil)
      Validate.name("queue name", queue)
      raise InvalidOption, "limit must be 1 to 1,000, not #{limit.inspect}" unless limit.is_a?(Integer) && (1..1000).cover?(limit)

      body = { "limit" => limit, "worker" => @worker }
      sent = HttpClient.lease(lease)
      body["lease"] = sent if sent
      body["kinds"] = kinds.map { |k| Validate.name("kind", k) } if kinds && !kinds.empty?
      request("POST", "/api/v1/queues/#{queue}/claim", body)["jobs"].map { |v| HttpClient.job(v) }
    end

    # A claimed job as the claim describes it (no run_at or group: 0 and nil).
    def self.job(v)
      trace = nil
      if v["traceparent"]
        carrier = { "traceparent" => v["traceparent"] }
        carrier["tracestate"] = v["tracestate"] if v["tracestate"]
        trace = JSON.generate(carrier)
      end
      Job.new(id: Integer(v["id"]), queue: v["queue"].to_s, kind: v["kind"], payload: v["payload"],
              priority: Integer(v["priority"] || 0), attempt: Integer(v["attempt"]),
              max_attempts: v["max_attempts"], run_at: 0, created_at: Integer(v["created_at"] || 0),
              token: Integer(v["token"]), lease_expires_at: Integer(v["lease_expires_at"]),
              trace_context: trace)
    end

    # Extends the job's lease by `lease` seconds from now (default: the queue's). Returns
    # whether the lease held; sets job.cancel_requested when an operator asked for a cancel.
    def heartbeat(job, lease: nil, strict: false)
      body = {}
      sent = HttpClient.lease(lease)
      body["lease"] = sent if sent
      out = fenced(job, "heartbeat", body, strict)
      return false unless out

      job.lease_expires_at = Integer(out["lease_expires_at"])
      job.cancel_requested ||= out["cancel_requested"] ? true : false
      true
    end

    # Stores `progress` (any JSON value) on the running job; returns whether the lease held.
    def progress(job, value, strict: false)
      Validate.payload(value, "progress")
      !fenced(job, "progress", { "progress" => value }, strict).nil?
    end

    # Completes a job (`result` stored with it) and returns whether its lease held; or many
    # (a request per queue and 1,000), returning the ids completed (the others marked lost).
    def complete(jobs, result: nil, strict: false)
      if jobs.is_a?(Job)
        body = {}
        unless result.nil?
          Validate.payload(result, "result")
          body["result"] = result
        end
        return !fenced(jobs, "complete", body, strict).nil?
      end
      raise InvalidOption, "a result goes with one job's completion, not a batch's" unless result.nil?

      jobs = jobs.to_a
      done = []
      jobs.group_by { |j| Validate.name("queue name", j.queue) }.each do |queue, held|
        held.each_slice(MAX_COMPLETE) do |part|
          refs = part.map { |j| { "id" => j.id, "token" => j.token.to_s } }
          completed = request("POST", "/api/v1/queues/#{queue}/complete", { "jobs" => refs })["completed"]
          part.each { |j| completed.include?(j.id) ? done << j.id : j.lost = true }
        end
      end
      lost = jobs.find(&:lost)
      raise LeaseLost.new(lost.id, "complete") if strict && lost

      done
    end

    # Records a failed attempt: retried after the queue's backoff, or at `retry_at` (µs since
    # the epoch, this machine's clock) or after `retry_in` seconds; dead when its attempts are
    # used up, or at once with `discard`. Returns :retry, :dead, :cancelled or :lost.
    def fail(job, error, retry_at: nil, retry_in: nil, discard: false, strict: false)
      raise InvalidOption, "error must be a string, not #{error.inspect}" unless error.is_a?(String)

      error = error.byteslice(0, 64 * 1024).scrub("") if error.bytesize > 64 * 1024
      raise InvalidOption, "give one of retry_at, retry_in and discard" if [retry_at, retry_in, discard || nil].compact.length > 1

      body = { "error" => error }
      retry_us = if retry_at then Validate.instant_us(retry_at) - Session.local_us
                 elsif retry_in then Validate.delay_us(retry_in)
                 end
      body["retry_in"] = HttpClient.duration([retry_us, 1].max) if retry_us # 0 is refused
      body["discard"] = true if discard
      out = fenced(job, "fail", body, strict)
      out ? out["outcome"].to_sym : :lost
    end

    private

    # A call carrying the job's lease token: its answer, or nil when the lease was lost (409
    # lease_lost, or the job gone: 404), with the job marked lost (LeaseLost with `strict`).
    def fenced(job, action, body, strict)
      request("POST", "/api/v1/jobs/#{job.id}/#{action}", { "token" => job.token.to_s }.merge(body)) || {}
    rescue LeaseLost, HttpError => e
      raise if e.is_a?(HttpError) && e.code != "job_not_found"

      job.lost = true
      raise LeaseLost.new(job.id, action) if strict

      nil
    end
  end

  # A Worker over HTTP: the same threads, batches, heartbeats and graceful stop, through an
  # HttpClient. The protocol has no release: the unstarted rest of a batch is given back as a
  # failed attempt retried at once. `run(drain: true)` returns once claims have found nothing
  # due for `drain_idle_s`.
  class HttpWorker < Worker
    # What the Worker asks of a client, over HTTP.
    class Jobs
      def initialize(http, lease_s)
        @http, @lease_s = http, lease_s
      end

      def queue_settings(_queue) = { lease_ms: (@lease_s * 1000).to_i, retention: nil }

      def claim(queue, limit, kinds: nil, **) = @http.claim(queue, limit, lease: @lease_s, kinds: kinds)

      def complete(jobs, **) = @http.complete(jobs)

      def fail(job, error, retry_at: nil, **)
        retry_at ? @http.fail(job, error, retry_in: [(retry_at - now_us) / 1e6, 0].max) : @http.fail(job, error)
      end

      def cancel(job, reason) = @http.fail(job, reason) == :cancelled

      def release(job) = @http.fail(job, "not started: the worker stopped", retry_in: 0) != :lost

      def heartbeat(job, **) = @http.heartbeat(job, lease: @lease_s)

      def now_us = Session.local_us

      def close; end
    end

    def initialize(http, queues, lease: 30, drain_idle_s: 1.0, **opts, &handler)
      raise InvalidOption, "over HTTP a worker cannot be transactional" if opts[:transactional]

      HttpClient.lease(lease)
      @http, @lease_s, @drain_idle_s = http, lease, drain_idle_s
      super(http.base_url, queues, lease_ms: (lease * 1000).to_i, **opts, &handler)
    end

    private

    def open_client = Jobs.new(@http, @lease_s)

    # The server's leader rescues expired leases.
    def rescue_now_and_then(_client); end

    # Claims have found nothing due for drain_idle_s (this thread's claims).
    def drained?(_client)
      now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      Thread.current[:backlog_empty_since] ||= now
      now - Thread.current[:backlog_empty_since] >= @drain_idle_s
    end
  end
end
