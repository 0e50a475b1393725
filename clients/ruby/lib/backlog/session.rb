# frozen_string_literal: true

module Backlog
  # What this process knows about one connection: the database's clock against this machine's
  # (every statement binds the database's time as `now`, as backlog's own workers do), and on
  # MySQL the shard counts of queues and whether one INSERT's ids are consecutive. Kept per
  # connection, for the application's connections too (weakly: it goes with the connection).
  class Session
    # How often the clock offset is measured again, in seconds.
    RESYNC_S = 60
    # How long a queue's shard count is trusted, in seconds (as the library does).
    SHARDS_TTL_S = 5

    @all = ObjectSpace::WeakMap.new
    @lock = Mutex.new

    # The session of a driver's connection.
    def self.of(driver)
      @lock.synchronize { @all[driver.raw] ||= new }
    end

    attr_reader :offset_us
    attr_writer :schema_checked

    # Raises SchemaMissing or SchemaTooOld, once a connection, before the first write on it.
    def check_schema(driver)
      return if @schema_checked

      Client.schema_version(driver)
      @schema_checked = true
    end

    def initialize
      @offset_us = 0
      @synced = nil
      @shards = {}
    end

    # This machine's clock in microseconds since the epoch.
    def self.local_us = Process.clock_gettime(Process::CLOCK_REALTIME, :microsecond)

    # The database's time: this machine's clock plus the measured offset, measured again every
    # minute (not inside a transaction the application holds, where it would only add a read).
    def now_us(driver, rounds: 1)
      stale = @synced.nil? || Process.clock_gettime(Process::CLOCK_MONOTONIC) - @synced > RESYNC_S
      sync(driver, rounds: rounds) if stale && (@synced.nil? || driver.in_transaction? == false)
      Session.local_us + @offset_us
    end

    # Measures the database's clock minus this machine's (db_now.sql; the best of `rounds`
    # round trips, exact to half of one) and keeps it. Returns it, in microseconds.
    def sync(driver, rounds: 3)
      best = nil
      rounds.times do
        before = Session.local_us
        db_now = Driver::Base.int(driver.query("db_now")[0][0])
        after = Session.local_us
        best = [db_now - ((before + after) / 2), after - before] if best.nil? || after - before < best[1]
      end
      @offset_us = best[0]
      @synced = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      @offset_us
    end

    # MySQL: how many shards a queue's claim point has (queue_shards.sql), read at most every 5 s.
    def shards(driver, queue)
      now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      n, at = @shards[queue]
      return n if n && now - at < SHARDS_TTL_S

      n = Driver::Base.int(driver.query("queue_shards", [queue])[0][0]) || 1
      @shards[queue] = [n, now]
      n
    end

    # MySQL: whether one multi-row INSERT's ids are consecutive (auto-increment lock mode 0 or
    # 1, MariaDB's and MySQL 5.7's default; not 2, MySQL 8's), read once.
    def consecutive_ids?(driver)
      return @consecutive unless @consecutive.nil?

      mode = driver.raw.query("SELECT @@innodb_autoinc_lock_mode", as: :array).first[0]
      @consecutive = Integer(mode) < 2
    end
  end
end
