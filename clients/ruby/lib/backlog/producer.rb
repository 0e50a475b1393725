# frozen_string_literal: true

module Backlog
  # The producer of the SQL contract (docs/sql.md "Enqueue from any language") on a connection
  # the application owns, inside whatever transaction it has open, never committing: a job
  # exists exactly when the application's own rows commit. A batch is one multi-row INSERT,
  # the library's own (job_insert_plain.sql; job_insert.sql for unique keys).
  module Producer
    # The options of one job, besides its queue and payload.
    OPTIONS = %i[priority run_at delay max_attempts unique_key kind group trace_context].freeze
    # Most rows in one /*ROWS*/ statement (SQLite binds at most 32,766 values, MySQL 65,535).
    CHUNK = 2000

    # One job, checked: its values as the INSERTs bind them; `delay_us` is added to the
    # database's time into `run_at` just before the INSERT.
    Row = Struct.new(:queue, :kind, :payload, :priority, :run_at, :delay_us, :max_attempts,
                     :unique_key, :group, :trace_context)
    # The keys a job's Hash may have, as symbols and as strings.
    KEYS = [:queue, :payload, *OPTIONS].flat_map { |k| [k, k.to_s] }.to_h { |k| [k, k.to_sym] }.freeze

    # A grouped job waits for its group's turn: inserted `waiting`, never `available`, in one
    # statement (docs/sql.md "Ordered groups"), so that no claimer sees it available even when
    # the application's connection commits each statement. The catalog has no such INSERT (the
    # library sets the group after its INSERT, in its own transaction): the plain INSERT of
    # docs/sql.md, with every column bound.
    GROUPED = {
      "postgres" => "INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, " \
                    "trace_context, unique_key, created_at, group_key, state) " \
                    "VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9, $10, 'waiting') " \
                    "ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND state IN " \
                    "('available', 'running', 'held', 'waiting') DO NOTHING RETURNING id",
      "sqlite" => "INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, " \
                  "trace_context, unique_key, created_at, group_key, state) " \
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'waiting') " \
                  "ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND state IN " \
                  "('available', 'running', 'held', 'waiting') DO NOTHING RETURNING id",
      "mysql" => "INSERT INTO backlog_job (queue, kind, payload, priority, run_at, max_attempts, " \
                 "trace_context, unique_key, created_at, group_key, state) " \
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'waiting') ON DUPLICATE KEY UPDATE id = id"
    }.freeze

    module_function

    # Checks one job's values (raising before anything is written).
    def row(queue, payload, priority: nil, run_at: nil, delay: nil, max_attempts: nil,
            unique_key: nil, kind: nil, group: nil, trace_context: nil)
      raise InvalidOption, "give run_at or delay, not both" if run_at && delay

      Row.new(
        Validate.name("queue name", queue),
        kind.nil? ? nil : Validate.name("kind", kind),
        Validate.payload(payload),
        priority.nil? ? 0 : Validate.priority(priority),
        run_at.nil? ? nil : Validate.instant_us(run_at),
        delay.nil? ? nil : Validate.delay_us(delay),
        max_attempts.nil? ? nil : Validate.max_attempts(max_attempts),
        unique_key.nil? ? nil : Validate.key("unique key", unique_key),
        group.nil? ? nil : Validate.key("group key", group),
        trace_context.nil? ? nil : Validate.trace_context(trace_context)
      )
    end

    # Checks every job of a batch before any is written: each a Hash with :queue, :payload and
    # any of OPTIONS (string or symbol keys).
    def rows(jobs)
      names = {} # a batch's queue names repeat: each checked once
      jobs.each_with_index.map do |job, i|
        raise InvalidOption, "job #{i}: expected a Hash with queue and payload, not #{job.inspect}" unless job.is_a?(Hash)

        if job.size == 2 && job.key?(:queue) && job.key?(:payload)
          # The common case, a job without options, without a keyword call.
          queue = job[:queue]
          queue = names[queue] ||= Validate.name("queue name", queue)
          next Row.new(queue, nil, Validate.payload(job[:payload]), 0)
        end
        opts = {}
        job.each_pair do |k, v|
          key = KEYS[k] or raise InvalidOption, "job #{i}: unknown option #{k.inspect}"
          opts[key] = v
        end
        raise InvalidOption, "job #{i}: queue and payload are required" unless opts.key?(:queue) && opts.key?(:payload)

        row(opts.delete(:queue), opts.delete(:payload), **opts)
      end
    end

    # Inserts checked rows on `driver` in its current transaction, in order; returns their ids
    # (a unique key an unfinished job of the queue holds: that job's id). Never commits.
    def insert(driver, rows, session: Session.of(driver))
      return [] if rows.empty?

      session.check_schema(driver)
      now = session.now_us(driver)
      ids = Array.new(rows.length)
      plain, unique, grouped = [], [], []
      rows.each_with_index do |r, i|
        (r.group ? grouped : r.unique_key ? unique : plain) << i
      end
      plain.each_slice(CHUNK) { |part| insert_plain(driver, session, rows, part, now, ids) }
      insert_unique(driver, session, rows, unique, now, ids) unless unique.empty?
      grouped.each { |i| ids[i] = insert_grouped(driver, rows[i], now) }
      ids
    end

    def run_at(r, now) = r.run_at || (now + (r.delay_us || 0))

    def insert_plain(driver, session, rows, part, now, ids)
      case driver.flavor
      when "postgres"
        cols = columns(rows, part, now)
        got = driver.query("job_insert_plain", [*cols.map { |c| driver.array(c) }, now])[0][0]
        new_ids = got.is_a?(Array) ? got : got.delete("{}").split(",").map { |s| Integer(s) }
        part.each_with_index { |i, k| ids[i] = new_ids[k] }
      when "sqlite"
        binds = part.flat_map do |i|
          r = rows[i]
          [r.queue, r.kind, r.payload, r.priority, run_at(r, now), r.max_attempts, r.trace_context, now]
        end
        sql = Sql.statement("sqlite", "job_insert_plain", rows: part.length, width: 8)
        n, last = driver.insert(sql, binds)
        raise Error, "inserted #{n} of #{part.length} jobs" unless n == part.length

        # One statement under the write lock: consecutive ids up to the last (AUTOINCREMENT).
        part.each_with_index { |i, k| ids[i] = last - part.length + 1 + k }
      else
        # Consecutive ids only in auto-increment lock modes 0 and 1: otherwise a row a statement.
        groups = session.consecutive_ids?(driver) ? [part] : part.map { |i| [i] }
        groups.each do |g|
          binds = g.flat_map do |i|
            r = rows[i]
            [r.queue, r.kind, r.payload, r.priority, run_at(r, now), r.max_attempts, r.trace_context,
             now, rand(session.shards(driver, r.queue))]
          end
          sql = Sql.statement("mysql", "job_insert_plain", rows: g.length, width: 9)
          n, first = driver.insert(sql, binds)
          raise Error, "inserted #{n} of #{g.length} jobs" unless n == g.length

          g.each_with_index { |i, k| ids[i] = first + k }
        end
      end
    end

    # The parallel arrays of PostgreSQL's job_insert_plain (and, with unique keys, job_insert).
    def columns(rows, part, now, unique: false)
      cols = [[], [], [], [], [], [], []]
      cols << [] if unique
      part.each do |i|
        r = rows[i]
        vals = [r.queue, r.kind, r.payload, r.priority, run_at(r, now), r.max_attempts, r.trace_context]
        vals << r.unique_key if unique
        vals.each_with_index { |v, c| cols[c] << v }
      end
      cols
    end

    # Rows with unique keys: one job_insert for all of them (a taken key inserts nothing), then
    # the holder of each key not inserted (job_find_unique.sql). A holder that finished in
    # between frees its key: that row is inserted again, up to three times.
    def insert_unique(driver, session, rows, todo, now, ids)
      3.times do
        todo.each_slice(CHUNK) { |part| unique_once(driver, session, rows, part, now, ids) }
        todo = todo.reject do |i|
          next true if ids[i]

          r = rows[i]
          ids[i] = Driver::Base.int(driver.query("job_find_unique", [r.queue, r.unique_key]).dig(0, 0))
        end
        return if todo.empty?
      end
      raise Error, "unique key #{rows[todo[0]].unique_key.inspect}: no holder after three inserts"
    end

    def unique_once(driver, session, rows, part, now, ids)
      case driver.flavor
      when "postgres"
        cols = columns(rows, part, now, unique: true)
        made = driver.query("job_insert", [*cols.map { |c| driver.array(c) }, now])
      when "sqlite"
        binds = part.flat_map do |i|
          r = rows[i]
          [r.queue, r.kind, r.payload, r.priority, run_at(r, now), r.max_attempts, r.trace_context,
           r.unique_key, now]
        end
        made = driver.rows(Sql.statement("sqlite", "job_insert", rows: part.length, width: 9), binds)
      else
        # No RETURNING: job_find_unique finds every key's holder, new or not. No marker
        # (lease_token NULL): the ids are not read back by it.
        binds = part.flat_map do |i|
          r = rows[i]
          [r.queue, r.kind, r.payload, r.priority, run_at(r, now), r.max_attempts, r.trace_context,
           r.unique_key, now, nil, rand(session.shards(driver, r.queue))]
        end
        driver.affected(Sql.statement("mysql", "job_insert", rows: part.length, width: 11), binds)
        return
      end
      by_key = made.to_h { |id, queue, key| [[queue, key], Driver::Base.int(id)] }
      part.each do |i|
        r = rows[i]
        ids[i] = by_key.delete([r.queue, r.unique_key]) # a key twice in a batch: the first
      end
    end

    def insert_grouped(driver, r, now)
      binds = [r.queue, r.kind, r.payload, r.priority, run_at(r, now), r.max_attempts, r.trace_context,
               r.unique_key, now, r.group]
      3.times do
        if driver.flavor == "mysql"
          n, id = driver.insert(GROUPED["mysql"], binds)
          return id if n == 1 && r.unique_key.nil?
        else
          id = Driver::Base.int(driver.rows(GROUPED[driver.flavor], binds).dig(0, 0))
          return id if id
        end
        held = Driver::Base.int(driver.query("job_find_unique", [r.queue, r.unique_key]).dig(0, 0))
        return held if held
      end
      raise Error, "unique key #{r.unique_key.inspect}: no holder after three inserts"
    end
  end

  module_function

  # Enqueues one job on `conn`, a connection the application owns (PG::Connection,
  # Mysql2::Client or SQLite3::Database), inside the transaction it has open: the job exists
  # exactly when that transaction commits. Never commits. Returns the job's id.
  #
  # payload: any JSON value. priority: -32768..32767, lower first (default 0). run_at: a Time
  # or microseconds since the epoch; or delay: seconds (or an ActiveSupport::Duration) from the
  # database's now. max_attempts: the job's own limit (default: the queue's). unique_key: while
  # an unfinished job of the queue holds it, no job is made and that job's id is returned.
  # kind: the handler's name. group: an ordered group (inserted waiting). trace_context: a W3C
  # traceparent, or {traceparent:, tracestate:}.
  #
  # Raises InvalidPayload, InvalidName or InvalidOption before anything is written.
  #
  #   conn.transaction do
  #     conn.exec_params("INSERT INTO account (email) VALUES ($1)", [email])
  #     Backlog.enqueue(conn, "emails", { "to" => email }, kind: "welcome", delay: 60)
  #   end
  def enqueue(conn, queue, payload, **opts)
    unknown = opts.keys - Producer::OPTIONS
    raise InvalidOption, "unknown options #{unknown.sort}" unless unknown.empty?

    Producer.insert(Driver.wrap(conn), [Producer.row(queue, payload, **opts)])[0]
  end

  # Enqueues jobs as `enqueue` does, on `conn`, in its current transaction, as one multi-row
  # INSERT: each a Hash with :queue, :payload and any of enqueue's options. Every job is checked
  # before the first is written. Returns their ids, in order.
  def enqueue_many(conn, jobs)
    Producer.insert(Driver.wrap(conn), Producer.rows(jobs))
  end
end
