# frozen_string_literal: true

# Two figures of issue 48 on PostgreSQL, one process (BENCHMARKS.md):
#
#   enqueue  Backlog.enqueue_many of 1,000 jobs a call against the same 1,000 rows sent as one
#            raw multi-row INSERT with pg, alternating, autocommit; jobs/s of each.
#   drain    a Backlog::Worker (no-op handler) draining N jobs; jobs/s.
#
#     ruby -Iclients/ruby/lib clients/ruby/examples/bench.rb enqueue URL [ROUNDS]
#     ruby -Iclients/ruby/lib clients/ruby/examples/bench.rb drain URL [N] [CONCURRENCY] [BATCH]
#
# URL: a migrated PostgreSQL database the bench may empty (it deletes every job).

require "backlog"
require "pg"

mode, url = ARGV
conn = PG.connect(url)
conn.exec("SET client_min_messages = warning")
clock = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
empty = -> { conn.exec("TRUNCATE backlog_job") }

case mode
when "enqueue"
  rounds = Integer(ARGV[2] || 20)
  batch = (0...1000).map { |i| { queue: "bench", payload: { "i" => i } } }
  raw_sql = "INSERT INTO backlog_job (queue, payload) VALUES " +
            (0...1000).map { |i| "($#{(2 * i) + 1}, $#{(2 * i) + 2}::jsonb)" }.join(", ")
  took = { "gem" => 0.0, "raw" => 0.0 }
  Backlog.enqueue_many(conn, batch) # the first call measures the clock and checks the schema
  conn.exec_params(raw_sql, batch.flat_map { |j| [j[:queue], JSON.generate(j[:payload])] })
  empty.call
  rounds.times do |r|
    %w[gem raw].rotate(r % 2).each do |who|
      t = clock.call
      if who == "gem"
        Backlog.enqueue_many(conn, batch)
      else
        # The same work a caller would do: JSON of each payload, then one INSERT.
        conn.exec_params(raw_sql, batch.flat_map { |j| [j[:queue], JSON.generate(j[:payload])] })
      end
      took[who] += clock.call - t
    end
    empty.call if (r % 10) == 9
  end
  gem_rate, raw_rate = took.transform_values { |s| rounds * 1000 / s }.values_at("gem", "raw")
  puts format("enqueue_many x1000: %.0f jobs/s; raw multi-row INSERT: %.0f jobs/s; ratio %.2f (%d rounds each)",
              gem_rate, raw_rate, gem_rate / raw_rate, rounds)
when "drain"
  n = Integer(ARGV[2] || 100_000)
  concurrency = Integer(ARGV[3] || 4)
  batch = Integer(ARGV[4] || 100)
  empty.call
  conn.exec("DELETE FROM backlog_job_done") rescue nil
  (n / 1000).times { Backlog.enqueue_many(conn, (0...1000).map { |i| { queue: "drain", payload: { "i" => i } } }) }
  conn.exec("VACUUM ANALYZE backlog_job")
  done = 0
  lock = Mutex.new
  worker = Backlog::Worker.new(url, "drain", concurrency: concurrency, batch: batch,
                               on_outcome: ->(_j, o) { lock.synchronize { done += 1 if o == :completed } }) { |_job| }
  t = clock.call
  worker.run(drain: true)
  s = clock.call - t
  puts format("drained %d no-op jobs in %.2f s: %.0f jobs/s (concurrency %d, batch %d)", done, s, done / s, concurrency, batch)
else
  abort "usage: bench.rb enqueue|drain URL ..."
end
