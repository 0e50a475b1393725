# frozen_string_literal: true

# An example worker built on the backlog gem (clients/ruby): works one queue and writes a line
# per event to a log file, so that what it did can be checked from outside (backlog's CI test
# of the SQL contract, crates/backlog-cli/tests/ruby_contract.rs, runs it beside `backlog work`):
#
#     run I ID ATTEMPT     the handler started job ID, whose payload is {"i": I, ...}
#     OUTCOME I ID         completed, retry, dead, cancelled, or lost (the lease was lost: the
#                          outcome was refused and another worker owns the job)
#
# A payload with "fail_once": true fails its first attempt. `--stall-after N` freezes the worker,
# as a hung process would, when it holds its (N+1)-th job: it writes {"id", "token", "owner"} of
# that job to --stall-file and sleeps while its heartbeats keep the lease, until it is killed.
# `--http URL --token T` works over `backlog serve` instead of SQL.
#
#     ruby -Iclients/ruby/lib clients/ruby/examples/worker.rb sqlite:///tmp/q.db emails --log e.log --drain

require "json"
require "optparse"
require "backlog"
require "backlog/http"

opts = { batch: 10, concurrency: 1, work_ms: 1.0 }
OptionParser.new do |o|
  o.banner = "usage: worker.rb URL QUEUE --log FILE [options]"
  o.on("--log FILE", "append one line per event here") { |v| opts[:log] = v }
  o.on("--owner NAME", "lease owner to record (default host:pid)") { |v| opts[:owner] = v }
  o.on("--batch N", Integer, "jobs claimed at once") { |v| opts[:batch] = v }
  o.on("--concurrency N", Integer, "worker threads") { |v| opts[:concurrency] = v }
  o.on("--drain", "exit once the queue is empty") { opts[:drain] = true }
  o.on("--work-ms MS", Float, "time each job takes") { |v| opts[:work_ms] = v }
  o.on("--stall-after N", Integer, "freeze on the job after this many") { |v| opts[:stall_after] = v }
  o.on("--stall-file FILE", "where --stall-after writes the frozen job") { |v| opts[:stall_file] = v }
  o.on("--grace S", Float, "seconds a job has to finish after SIGTERM") { |v| opts[:grace] = v }
  o.on("--token TOKEN", "over HTTP: the produce token") { |v| opts[:token] = v }
end.parse!
url, queue = ARGV
abort "usage: worker.rb URL QUEUE --log FILE [options]" unless url && queue && opts[:log]

log = File.open(opts[:log], "a")
log.sync = true # a line at a time: nothing is lost to a SIGKILL
lock = Mutex.new
handled = 0
write = ->(line) { lock.synchronize { log.write("#{line}\n") } }
worker = nil

handler = lambda do |job|
  stall = lock.synchronize do
    (opts[:stall_after] && handled == opts[:stall_after]).tap { handled += 1 }
  end
  if stall
    tmp = "#{opts[:stall_file]}.tmp"
    File.write(tmp, JSON.generate({ "id" => job.id, "token" => job.token, "owner" => worker.owner }))
    File.rename(tmp, opts[:stall_file]) # appears whole
    write.call("run #{job.payload['i']} #{job.id} #{job.attempt}")
    sleep
  end
  write.call("run #{job.payload['i']} #{job.id} #{job.attempt}")
  sleep(opts[:work_ms] / 1000.0)
  raise "fails once on purpose" if job.payload["fail_once"] && job.attempt == 1
end
outcome = ->(job, what) { write.call("#{what} #{job.payload['i']} #{job.id}") }
common = { owner: opts[:owner], batch: opts[:batch], concurrency: opts[:concurrency],
           grace_s: opts[:grace] || 30.0, on_outcome: outcome }
worker = if url.start_with?("http")
           Backlog::HttpWorker.new(Backlog::HttpClient.new(url, token: opts[:token]), queue, lease: 5, **common, &handler)
         else
           Backlog::Worker.new(url, queue, **common, &handler)
         end
worker.run(drain: opts[:drain])
