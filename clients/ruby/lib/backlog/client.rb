# frozen_string_literal: true

require "json"

module Backlog
  # One connection of its own to a queue database and the contract's operations on it
  # (docs/sql.md): enqueue, claim, complete, fail, heartbeat, release, cancel, rescue. Every
  # outcome is fenced by the claim's lease token. Not shared between threads: give each thread
  # its own Client, as the Worker does.
  #
  #   client = Backlog::Client.new("postgres://app@127.0.0.1/app")
  #   client.enqueue("emails", { "to" => "a@example.com" })
  #   job = client.claim("emails", 10).first
  #   client.complete(job)
  class Client
    # Defaults of a queue without a row in backlog_queue (docs/sql.md, table backlog_queue).
    QUEUE_DEFAULTS = {
      paused: false, max_attempts: 25, backoff_base_ms: 1000, backoff_max_ms: 3_600_000,
      lease_ms: 30_000, ordering: "fifo", retention: "keep"
    }.freeze
    # The rescue's floor for a full pass: the smallest 64-bit integer.
    FULL_PASS = -(2**63)
    # Most expired leases one rescue statement moves.
    RESCUE_BATCH = 1000

    attr_reader :url, :driver

    # Opens a connection to the database `url` names and checks its schema: SchemaMissing when
    # it has none, SchemaTooOld below SCHEMA_VERSION.
    def initialize(url, check_schema: true)
      @url = url
      @driver = Driver.open(url)
      @session = Session.new
      @in_transaction = false
      begin
        schema_version if check_schema
        @session.schema_checked = check_schema
        @session.sync(@driver)
      rescue Exception # rubocop:disable Lint/RescueException - closed, then re-raised
        @driver.close
        raise
      end
    end

    def flavor = @driver.flavor

    def close = @driver.close

    # The schema version of the database (the last migration `backlog migrate` applied).
    def schema_version = Client.schema_version(@driver)

    def self.schema_version(driver)
      version = begin
        Driver::Base.int(driver.query("schema_version")[0][0])
      rescue StandardError => e
        raise SchemaMissing if driver.schema_missing?(e)

        raise
      end
      raise SchemaMissing if version.zero?
      raise SchemaTooOld, version if version < SCHEMA_VERSION

      version
    end

    # A transaction on this client's connection, its raw connection yielded for your own
    # statements: jobs enqueued inside it exist exactly when it commits.
    def transaction
      return yield @driver.raw if @in_transaction

      @driver.transaction do
        @in_transaction = true
        yield @driver.raw
      ensure
        @in_transaction = false
      end
    end

    # The database's time in microseconds since the epoch: this machine's clock plus the offset
    # measured when the client connected and every minute after. Statements bind it as `now`.
    def now_us = @in_transaction ? Session.local_us + @session.offset_us : @session.now_us(@driver)

    # Measures the database's clock against this machine's again; returns the offset in µs.
    def sync_clock = @session.sync(@driver)

    # ---- producing

    # Enqueues one job and returns its id, with the options of Backlog.enqueue. Outside
    # #transaction it commits at once; inside, the job exists when the transaction commits.
    def enqueue(queue, payload, **opts)
      unknown = opts.keys - Producer::OPTIONS
      raise InvalidOption, "unknown options #{unknown.sort}" unless unknown.empty?

      insert([Producer.row(queue, payload, **opts)])[0]
    end

    # Enqueues jobs (Hashes with :queue, :payload and options) as one multi-row INSERT, in one
    # transaction (or the one open), all or none. Returns their ids, in order.
    def enqueue_many(jobs) = insert(Producer.rows(jobs))

    def insert(rows)
      simple = rows.length == 1 && rows[0].unique_key.nil?
      retrying do
        if @in_transaction || simple
          Producer.insert(@driver, rows, session: @session)
        else
          transaction { Producer.insert(@driver, rows, session: @session) }
        end
      end
    end

    # ---- consuming

    # The queue's settings (backlog_queue), or the defaults when it has no row.
    def queue_settings(queue)
      row = @driver.query("queue_get", [queue])[0]
      return QUEUE_DEFAULTS.dup if row.nil?

      {
        paused: Driver::Base.bool(row[1]), max_attempts: Integer(row[2]),
        backoff_base_ms: Integer(row[3]), backoff_max_ms: Integer(row[4]), lease_ms: Integer(row[5]),
        ordering: row[6], retention: row[7]
      }
    end

    # Claims up to `limit` due jobs of `queue` under one fresh lease token, in the queue's
    # order. `kinds`: only jobs of these kinds (nil: any).
    def claim(queue, limit, owner: nil, lease_ms: nil, kinds: nil, settings: nil)
      settings ||= queue_settings(queue)
      token = Backlog.new_token
      now = now_us
      expires = now + ((lease_ms || settings[:lease_ms]) * 1000)
      order = settings[:ordering] == "lifo" ? "lifo" : "fifo"
      owner ||= Backlog.default_owner
      rows = retrying { claim_rows(queue, token, owner, expires, now, kinds, limit, order) }
      jobs = rows.map do |r|
        Job.new(id: Integer(r[0]), queue: queue, kind: r[1], payload: JSON.parse(r[2]),
                priority: Integer(r[3]), attempt: Integer(r[4]), max_attempts: Driver::Base.int(r[5]),
                run_at: Integer(r[6]), created_at: Integer(r[7]), token: token,
                lease_expires_at: expires, trace_context: r[8], group: r[9])
      end
      # UPDATE ... RETURNING gives rows in no particular order: the claim's order again.
      if order == "fifo"
        jobs.sort_by { |j| [j.priority, j.run_at, j.id] }
      else
        jobs.sort_by { |j| [j.priority, -j.run_at, -j.id] }
      end
    end

    def claim_rows(queue, token, owner, expires, now, kinds, limit, order)
      name = "job_claim_#{order}"
      case flavor
      when "sqlite"
        @driver.query(name, [token, owner, expires, now, queue, kinds && JSON.generate(kinds), limit])
      when "postgres"
        binds = [token, owner, expires, now, queue, kinds && @driver.array(kinds), limit]
        # An empty cursor: every claim starts at each shard's head (a full pass).
        binds << "{}" if order == "fifo"
        @driver.query(name, binds)
      else
        mysql_claim(queue, token, owner, expires, now, kinds && JSON.generate(kinds), limit, order)
      end
    end

    # MySQL: no UPDATE ... RETURNING. Lock the rows with SKIP LOCKED, shard by shard from a
    # random one, then mark them, in one transaction; the SELECT shows the attempt it writes.
    def mysql_claim(queue, token, owner, expires, now, kinds, limit, order)
      @driver.transaction do
        n = Driver::Base.int(@driver.query("queue_shards", [queue])[0][0])
        first = rand(n)
        rows = []
        n.times do |k|
          shard = (first + k) % n
          binds = if order == "fifo"
                    [queue, shard, now, kinds, kinds, nil, nil, nil, nil, nil, nil, queue, limit - rows.length]
                  else
                    [queue, shard, now, kinds, kinds, queue, limit - rows.length]
                  end
          rows.concat(@driver.query("job_claim_#{order}", binds))
          break if rows.length >= limit
        end
        unless rows.empty?
          ids = padded(rows.map(&:first))
          @driver.exec("job_claim_update", [token, owner, expires, now, *ids], lists: { "IDS" => ids.length })
        end
        rows
      end
    end

    # Completes jobs as the queue's retention says (keep, delete, archive), each only while
    # its row is still running under its token. One job: returns whether it was completed
    # (false: the lease was lost, nothing changed; with `strict`, LeaseLost). Many: returns the
    # ids completed, in one statement (a claim's batch shares one token) or one transaction.
    def complete(jobs, retention: nil, strict: false)
      one = jobs.is_a?(Job)
      jobs = one ? [jobs] : jobs.to_a # not Array(job): a Struct converts to its fields
      return (one ? false : []) if jobs.empty?

      kept = retention || queue_settings(jobs[0].queue)[:retention]
      now = now_us
      done = retrying { complete_rows(kept, jobs, now) }
      jobs.each { |j| j.lost = true unless done.include?(j.id) }
      raise LeaseLost.new(jobs.find(&:lost).id, "complete") if strict && done.length < jobs.length

      one ? done.include?(jobs[0].id) : done
    end
    alias ack complete

    def complete_rows(retention, jobs, now)
      ids = jobs.map(&:id)
      case flavor
      when "sqlite"
        pairs = JSON.generate(jobs.map { |j| [j.id, j.token] })
        rows = case retention
               when "delete" then @driver.query("job_complete_delete", [pairs])
               when "keep" then @driver.query("job_complete_keep", [pairs, now])
               else
                 transaction do
                   @driver.exec("job_complete_archive", [pairs, now])
                   @driver.query("job_complete_delete", [pairs])
                 end
               end
        rows.map { |r| Integer(r[0]) }
      when "postgres"
        binds = [@driver.array(ids), @driver.array(jobs.map(&:token))]
        binds << now unless retention == "delete"
        @driver.query("job_complete_#{retention}", binds).map { |r| Integer(r[0]) }
      else
        mysql_complete(retention, jobs, now)
      end
    end

    # MySQL: one job of retention delete in one fenced statement; otherwise lock the rows, keep
    # those still running under their token, copy them where they are kept (keep: the completed
    # jobs' ring; archive), and delete them, in one transaction.
    def mysql_complete(retention, jobs, now)
      if retention == "delete" && jobs.length == 1
        j = jobs[0]
        n = @driver.exec("job_complete_delete_fenced", [j.id, j.token], lists: { "IDS" => 1 })
        return n == 1 ? [j.id] : []
      end
      token_of = jobs.to_h { |j| [j.id, j.token] }
      transaction do
        ids = padded(token_of.keys)
        locked = @driver.query("job_complete_lock", ids, lists: { "IDS" => ids.length })
        mine = locked.select { |id, token, state| state == "running" && Driver::Base.int(token) == token_of[Integer(id)] }
                     .map { |r| Integer(r[0]) }
        unless mine.empty?
          ids = padded(mine)
          list = { "IDS" => ids.length }
          @driver.exec("job_complete_#{retention}", [now, *ids], lists: list) unless retention == "delete"
          @driver.exec("job_complete_delete", ids, lists: list)
        end
        mine
      end
    end

    # Fails this attempt with `error`: a retry at `retry_at` (µs; default the queue's backoff),
    # or dead when it was the last attempt. Returns :retry, :dead or :lost (nothing changed;
    # with `strict`, LeaseLost).
    def fail(job, error, retry_at: nil, settings: nil, strict: false)
      settings ||= queue_settings(job.queue)
      now = now_us
      if job.attempt >= (job.max_attempts || settings[:max_attempts])
        state, run_at, finished_at = "dead", now, now
      else
        state, finished_at = "available", nil
        run_at = retry_at || (now + Client.backoff_us(job.attempt, settings))
      end
      held = retrying { fail_row(job, state, run_at, finished_at, now, error.to_s) }
      return :lost unless held?(held, strict, job, "fail")

      state == "dead" ? :dead : :retry
    end
    alias nack fail

    # Answers a requested cancel (or gives the job up): the fail statement with the state
    # `cancelled`. False (LeaseLost with `strict`) when the lease was lost.
    def cancel(job, reason = "cancelled", strict: false)
      now = now_us
      held?(retrying { fail_row(job, "cancelled", now, now, now, reason) }, strict, job, "cancel")
    end

    def fail_row(job, state, run_at, finished_at, now, error)
      binds = if flavor == "mysql"
                [now, error, state, state, run_at, finished_at, job.id, job.token]
              else
                [state, run_at, finished_at, now, error, job.id, job.token]
              end
      @driver.exec("job_fail", binds) == 1
    end

    # Extends the job's lease to now + lease. False (LeaseLost with `strict`) when the lease was
    # lost: stop the job and report nothing. Sets job.cancel_requested when it was asked for.
    def heartbeat(job, lease_ms: nil, strict: false)
      lease_ms ||= queue_settings(job.queue)[:lease_ms]
      expires = now_us + (lease_ms * 1000)
      held, cancel = retrying do
        if flavor == "mysql"
          if @driver.exec("job_heartbeat", [expires, job.id, job.token]) == 1
            row = @driver.query("job_heartbeat_cancel", [job.id, job.token])[0]
            row ? [true, Driver::Base.bool(row[0])] : [false, false]
          else
            [false, false]
          end
        else
          row = @driver.query("job_heartbeat", [expires, job.id, job.token])[0]
          row ? [true, Driver::Base.bool(row[0])] : [false, false]
        end
      end
      if held
        job.lease_expires_at = expires
        job.cancel_requested ||= cancel
      else
        job.lost = true
      end
      held?(held, strict, job, "heartbeat")
    end

    # Gives the job back without using an attempt, to run again at `run_at` (µs; default now).
    def release(job, run_at: nil, strict: false)
      at = run_at || now_us
      held?(retrying { @driver.exec("job_release", [at, job.id, job.token]) == 1 }, strict, job, "release")
    end

    # Makes jobs whose lease expired available again (or dead after their last attempt). Safe
    # from any number of processes at once. Returns how many it moved.
    def rescue_expired(limit: RESCUE_BATCH)
      now = now_us
      retrying do
        case flavor
        when "mysql"
          transaction do
            ids = @driver.query("job_rescue_ids", [now, FULL_PASS, limit, now, limit]).map { |r| Integer(r[0]) }
            next 0 if ids.empty?

            ids = padded(ids)
            @driver.exec("job_rescue", [now, now, now, *ids, now], lists: { "IDS" => ids.length })
          end
        else
          @driver.query("job_rescue", [now, limit, FULL_PASS]).length
        end
      end
    end

    # Jobs of the queues that are available (due or not), running or waiting: 0 means drained.
    def pending(queues, kinds: nil)
      queues = Array(queues)
      row = case flavor
            when "sqlite"
              @driver.query("job_count_pending", [JSON.generate(queues), kinds && JSON.generate(kinds), nil])
            when "postgres"
              @driver.query("job_count_pending", [@driver.array(queues), kinds && @driver.array(kinds), nil])
            else
              k = kinds && JSON.generate(kinds)
              @driver.query("job_count_pending", [*queues, k, k, nil, nil], lists: { "QUEUES" => queues.length })
            end
      Integer(row[0][0])
    end

    # The retry delay after attempt `attempt`, in µs: min(base * 2^(attempt-1), max), then a
    # uniformly random point between half of that and all of it (docs/sql.md "Nack").
    def self.backoff_us(attempt, settings)
      ms = [settings[:backoff_base_ms] * (2**[attempt - 1, 0].max), settings[:backoff_max_ms]].min
      (rand((ms / 2.0)..ms.to_f) * 1000).to_i
    end

    private

    def held?(held, strict, job, operation)
      job.lost = true unless held
      raise LeaseLost.new(job.id, operation) if strict && !held

      held
    end

    # A list padded to a power of two by repeating its last id, as the library does, so that
    # the prepared statements stay few (an IN list is a set).
    def padded(ids)
      n = 1
      n *= 2 while n < ids.length
      ids + Array.new(n - ids.length, ids[-1])
    end

    # Runs the block again when the database rolled it back as a deadlock victim (it changed
    # nothing). Not inside a caller's transaction, which was rolled back whole.
    def retrying
      attempt = 0
      begin
        yield
      rescue StandardError => e
        attempt += 1
        raise if @in_transaction || !@driver.transient?(e) || attempt >= 10

        sleep(rand(0.001..0.01) * attempt)
        retry
      end
    end
  end
end
