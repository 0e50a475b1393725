# frozen_string_literal: true

module Backlog
  # The leases a worker holds, renewed every third of the lease from a thread of its own, on a
  # connection of its own, so that a long job (or one waiting its turn in a batch) keeps its
  # lease. `renew` is given each held job and returns whether its lease held.
  class HeldLeases
    attr_reader :error

    def initialize(every_s, &renew)
      @every_s, @renew = every_s, renew
      @held = {}
      @lock = Mutex.new
      @wake = ConditionVariable.new
      @stop = false
    end

    def hold(jobs) = @lock.synchronize { jobs.each { |j| @held[j.id] = j } }

    def drop(job) = @lock.synchronize { @held.delete(job.id) }

    def jobs = @lock.synchronize { @held.values }

    def start
      @thread = Thread.new do
        Thread.current.name = "backlog-heartbeats"
        loop do
          @lock.synchronize { @wake.wait(@lock, @every_s) unless @stop }
          break if @lock.synchronize { @stop }

          jobs.each { |job| drop(job) unless @renew.call(job) }
        end
      rescue StandardError => e # the worker stops when its heartbeats cannot run
        @error = e
      end
      self
    end

    def stop
      @lock.synchronize do
        @stop = true
        @wake.broadcast
      end
      @thread&.join
    end
  end

  # Works queues over SQL: `concurrency` threads, each with a connection of its own, claim
  # batches (SKIP LOCKED on PostgreSQL and MySQL, SQLite's single writer), run the handler for
  # each job, and report each outcome fenced by the lease: a return completes the job (the
  # completions of a batch in one statement), an exception fails it (retried after the queue's
  # backoff, or dead after its last attempt; Retry chooses the delay). Leases are renewed by
  # heartbeats; expired ones are rescued before claims, at most once a second.
  #
  # `transactional: true` runs the handler inside a transaction on the worker's connection,
  # given as the second argument, with the completion in the same transaction: the handler's
  # writes commit exactly when the job completes (a lost lease rolls them back).
  #
  # `run` stops on SIGTERM or SIGINT (run on the main thread) or #stop: the jobs in hand get
  # `grace_s` seconds to finish and are reported; the unstarted rest of each batch is released;
  # a job still running after the grace period is left to its lease (rescued once it expires).
  #
  #   worker = Backlog::Worker.new(ENV["DATABASE_URL"], "emails", concurrency: 4) do |job|
  #     deliver(job.payload["to"])
  #   end
  #   worker.run
  class Worker
    # How often, at most, a worker process rescues expired leases (docs/sql.md "How often").
    RESCUE_EVERY_S = 1.0

    attr_reader :owner, :queues

    # `on_outcome.call(job, outcome)` hears what became of each job: :completed, :retry,
    # :dead, :cancelled or :lost (its lease was lost: the outcome was not recorded).
    def initialize(url, queues, concurrency: 1, batch: 10, kinds: nil, owner: nil, lease_ms: nil,
                   poll_max_s: 1.0, grace_s: 30.0, transactional: false, on_outcome: nil, &handler)
      raise ArgumentError, "a handler block is required" unless handler
      raise InvalidOption, "concurrency must be 1 or more" unless concurrency.is_a?(Integer) && concurrency >= 1
      raise InvalidOption, "batch must be 1 to 1,000" unless batch.is_a?(Integer) && (1..1000).cover?(batch)

      @url = url
      @queues = Array(queues).map { |q| Validate.name("queue name", q) }
      raise InvalidOption, "give at least one queue" if @queues.empty?

      @kinds = kinds&.map { |k| Validate.name("kind", k) }
      @concurrency, @batch, @lease_ms = concurrency, batch, lease_ms
      @owner = owner || Backlog.default_owner
      @poll_max_s, @grace_s, @transactional = poll_max_s, grace_s, transactional
      @on_outcome = on_outcome || ->(_job, _outcome) {}
      @handler = handler
      @lock = Mutex.new
      @wake = ConditionVariable.new
      @stopping = false
      @last_rescue = 0.0
      @running = {}
    end

    # Asks the worker to stop: the jobs in hand finish, the rest of each batch is released.
    def stop
      @lock.synchronize do
        @stopping = true
        @wake.broadcast
      end
    end

    def stopping? = @stopping

    # Works until #stop (or SIGTERM / SIGINT with `signals`, the default on the main thread),
    # or, with `drain`, until the queues have no job available (due or not) or running.
    def run(drain: false, signals: Thread.current == Thread.main)
      previous = {}
      if signals
        %w[TERM INT].each { |sig| previous[sig] = trap(sig) { Thread.new { stop } } }
      end
      beat_client = open_client
      lease_ms = @lease_ms || beat_client.queue_settings(@queues[0])[:lease_ms]
      beats = HeldLeases.new(lease_ms / 3000.0) { |job| beat_client.heartbeat(job, lease_ms: lease_ms) }
      beats.start
      threads = Array.new(@concurrency) do |n|
        Thread.new do
          Thread.current.name = "backlog-worker-#{n}"
          Thread.current.report_on_exception = false
          work(beats, lease_ms, drain)
        end
      end
      finish(threads, beats, beat_client)
      raise beats.error if beats.error
    ensure
      previous&.each { |sig, handler| trap(sig, handler) }
    end

    private

    # Waits for the threads; after a stop, for `grace_s` at most. A thread still running a job
    # then is ended: its job is left to its lease, the unstarted rest of its batch released.
    def finish(threads, beats, beat_client)
      deadline = nil
      threads.each do |t|
        loop do
          break if t.join(0.05)

          if beats.error
            stop
          elsif @stopping
            deadline ||= Process.clock_gettime(Process::CLOCK_MONOTONIC) + @grace_s
            next unless Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

            running = @lock.synchronize { @running[t] }
            warn "backlog: job #{running&.id} still running after the #{@grace_s} s grace period; left to its lease"
            t.kill
            t.join
            beats.drop(running) if running
            break
          end
        end
      end
      threads.each(&:value) # re-raises what ended a thread
    ensure
      beats.stop
      beats.jobs.each { |job| beat_client.release(job) } if beats.error.nil?
      beat_client.close
    end

    def open_client = Client.new(@url)

    # Whether the queues have no job available (due or not), running or waiting.
    def drained?(client) = client.pending(@queues, kinds: @kinds).zero?

    def work(beats, lease_ms, drain)
      client = open_client
      settings, refreshed = {}, 0.0
      idle, turn = 0.05, 0
      until @stopping
        raise Error, "heartbeats failed: #{beats.error.message}" if beats.error

        now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        if now - refreshed > 5
          @queues.each { |q| settings[q] = client.queue_settings(q) }
          refreshed = now
        end
        rescue_now_and_then(client)
        jobs = []
        @queues.length.times do |k|
          q = @queues[(turn + k) % @queues.length]
          jobs = client.claim(q, @batch, owner: @owner, lease_ms: lease_ms, kinds: @kinds, settings: settings[q])
          break unless jobs.empty?
        end
        turn += 1
        if jobs.empty?
          return if drain && drained?(client)

          @lock.synchronize { @wake.wait(@lock, idle) unless @stopping }
          idle = [idle * 2, @poll_max_s].min
          next
        end
        idle = 0.05
        Thread.current[:backlog_empty_since] = nil
        run_batch(client, beats, jobs, settings[jobs[0].queue])
      end
    ensure
      client&.close
    end

    def run_batch(client, beats, jobs, settings)
      beats.hold(jobs)
      done = []
      jobs.each_with_index do |job, i|
        if @stopping
          jobs[i..].each do |rest|
            beats.drop(rest)
            client.release(rest)
          end
          break
        end
        @lock.synchronize { @running[Thread.current] = job }
        outcome = run_one(client, job, settings)
        @lock.synchronize { @running.delete(Thread.current) }
        if outcome == :done
          done << job
        else
          beats.drop(job)
          @on_outcome.call(job, outcome)
        end
      end
    ensure
      unless done.nil? || done.empty?
        completed = client.complete(done, retention: settings[:retention])
        done.each do |job|
          beats.drop(job)
          @on_outcome.call(job, completed.include?(job.id) ? :completed : :lost)
        end
      end
    end

    # Runs the handler; :done when it returned (completed with its batch), else the outcome.
    def run_one(client, job, settings)
      return :lost if job.lost?
      return(client.cancel(job, "cancelled by an operator") ? :cancelled : :lost) if job.cancel_requested?

      if @transactional
        transactional(client, job, settings)
      else
        @handler.call(job)
        job.cancel_requested? ? (client.cancel(job, "cancelled by an operator") ? :cancelled : :lost) : :done
      end
    rescue Retry => e
      client.fail(job, e.message, retry_at: client.now_us + (e.delay_s * 1_000_000).to_i, settings: settings)
    rescue StandardError => e
      client.fail(job, "#{e.class}: #{e.message}", settings: settings)
    end

    # The handler's writes and the completion in one transaction: committed when the job's
    # lease held, rolled back when it was lost.
    def transactional(client, job, settings)
      client.transaction do |conn|
        @handler.call(job, conn)
        raise LeaseLost.new(job.id, "complete") unless client.complete(job, retention: settings[:retention])
      end
      :completed
    rescue LeaseLost
      :lost
    end

    # Rescue before claiming, at most once a second a process, as the library does: with no
    # backlog process alongside, nobody else would recover a crashed worker's jobs.
    def rescue_now_and_then(client)
      due = @lock.synchronize do
        now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        (now - @last_rescue >= RESCUE_EVERY_S).tap { |d| @last_rescue = now if d }
      end
      client.rescue_expired if due
    end
  end
end
