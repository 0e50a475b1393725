# frozen_string_literal: true

require "securerandom"
require "socket"

module Backlog
  # A claimed job. `token` fences every outcome; `lost` and `cancel_requested` are set by
  # heartbeats. `trace_context` is the W3C context it was enqueued with (JSON text) or nil;
  # `run_at` and `group` are 0 and nil for a job claimed over HTTP.
  Job = Struct.new(:id, :queue, :kind, :payload, :priority, :attempt, :max_attempts, :run_at,
                   :created_at, :token, :lease_expires_at, :trace_context, :group, :lost,
                   :cancel_requested, keyword_init: true) do
    def lost? = !!lost

    def cancel_requested? = !!cancel_requested
  end

  # Raised by a handler to fail this attempt and run the job again no earlier than `delay_s`
  # seconds from now, instead of after the queue's backoff.
  class Retry < StandardError
    attr_reader :delay_s

    def initialize(message = "retry", delay_s: 0)
      super(message)
      @delay_s = delay_s
    end
  end

  module_function

  # A fresh lease token: a random non-zero signed 64-bit integer, never a counter.
  def new_token
    loop do
      t = SecureRandom.random_number(2**64) - (2**63)
      return t unless t.zero?
    end
  end

  # What lease_owner records by default, as the library does: host:pid.
  def default_owner = "#{Socket.gethostname.dup.force_encoding(Encoding::UTF_8)}:#{Process.pid}"
end
