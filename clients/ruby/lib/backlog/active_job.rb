# frozen_string_literal: true

require "active_job"
require_relative "../backlog"

# Active Job on backlog: `config.active_job.queue_adapter = :backlog` enqueues each job as a
# backlog job (queue: the job's queue_name, kind: its class name, payload: its serialization),
# and Backlog::ActiveJobRunner performs them.
#
# - `perform_later` and `set(wait:)`, `set(wait_until:)`: due at once, or at that time.
# - `set(priority:)` / `queue_with_priority`: backlog's priority (-32768..32767, lower first).
# - Retries: an exception `retry_on` handles re-enqueues the job as Active Job does (a new
#   backlog job, with its wait); any other exception fails the backlog job, which backlog
#   retries after the queue's backoff until its attempts are used up (then it is dead).
#   `executions` counts both. `self.backlog_max_attempts = 5` in a job class sets its jobs'
#   own attempt limit (default: the queue's).
module ActiveJob
  class Base
    class_attribute :backlog_max_attempts, instance_accessor: false
  end

  module QueueAdapters
    # The adapter. Without arguments (`queue_adapter = :backlog`) it writes on a connection of
    # its own to ENV["BACKLOG_DATABASE_URL"] (one per thread). Give `connection:` a Proc that
    # returns the application's connection (say
    # `-> { ActiveRecord::Base.connection.raw_connection }`) and each job is written inside
    # the application's open transaction: it exists exactly when the transaction commits.
    class BacklogAdapter
      def initialize(url: ENV.fetch("BACKLOG_DATABASE_URL", nil), connection: nil)
        raise ArgumentError, "give url: or connection:, or set BACKLOG_DATABASE_URL" if url.nil? && connection.nil?

        @url, @connection = url, connection
        @clients = {}
        @lock = Mutex.new
      end

      def enqueue(job) = enqueue_at(job, nil)

      # `timestamp`: when the job may run, seconds since the epoch (Float), or nil for now.
      def enqueue_at(job, timestamp)
        job.provider_job_id = produce([row(job, timestamp)])[0]
      end

      # Many jobs as one multi-row INSERT (Rails 7.1's perform_all_later). Returns how many.
      def enqueue_all(jobs)
        ids = produce(jobs.map { |j| row(j, j.scheduled_at&.to_f) })
        jobs.zip(ids) do |j, id|
          j.provider_job_id = id
          j.successfully_enqueued = true if j.respond_to?(:successfully_enqueued=)
        end
        ids.length
      end

      private

      def row(job, timestamp)
        opts = { queue: job.queue_name.to_s, payload: job.serialize, kind: job.class.name }
        opts[:priority] = job.priority unless job.priority.nil?
        opts[:run_at] = (timestamp.to_r * 1_000_000).floor if timestamp
        limit = job.class.backlog_max_attempts
        opts[:max_attempts] = limit unless limit.nil?
        opts
      end

      def produce(rows)
        return Backlog.enqueue_many(@connection.call, rows) if @connection

        client = @lock.synchronize { @clients[Thread.current] ||= Backlog::Client.new(@url) }
        client.enqueue_many(rows)
      end
    end
  end
end

module Backlog
  # Performs Active Job jobs from backlog queues: a Backlog::Worker (threads, heartbeats,
  # graceful stop on SIGTERM) whose handler runs `ActiveJob::Base.execute` on each payload.
  #
  #   Backlog::ActiveJobRunner.new(ENV["BACKLOG_DATABASE_URL"], %w[default mailers],
  #                                concurrency: 5).run
  class ActiveJobRunner
    attr_reader :worker

    def initialize(url, queues = ["default"], **worker_opts)
      @worker = Worker.new(url, queues, **worker_opts) { |job| ActiveJobRunner.perform(job) }
    end

    def run(...) = @worker.run(...)

    def stop = @worker.stop

    # Runs one backlog job's Active Job: its executions are Active Job's own (retry_on's
    # re-enqueues) plus backlog's earlier attempts of this job.
    def self.perform(job)
      data = job.payload.merge("provider_job_id" => job.id,
                               "executions" => job.payload.fetch("executions", 0).to_i + job.attempt - 1)
      ::ActiveJob::Base.execute(data)
    end
  end
end
