# frozen_string_literal: true

# backlog's SQL contract (docs/sql.md) and HTTP API (docs/http.md) in Ruby.
#
# - Backlog.enqueue / Backlog.enqueue_many: the producer on a connection the application owns
#   (PG::Connection, Mysql2::Client, SQLite3::Database), in its transaction.
# - Backlog::Client: one connection of its own and the contract's operations: enqueue, claim,
#   complete, fail, heartbeat, release, cancel, rescue.
# - Backlog::Worker: works queues with threads, heartbeats and a graceful stop.
# - Backlog::HttpClient, Backlog::HttpWorker (require "backlog/http"): the same over
#   `backlog serve`.
# - ActiveJob::QueueAdapters::BacklogAdapter and Backlog::ActiveJobRunner
#   (require "backlog/active_job"): Active Job on backlog.
# - Errors: Backlog::Error and its subclasses (backlog/errors.rb).
#
# The drivers are required when first used: install the ones you need (pg, mysql2, sqlite3).
module Backlog
end

require_relative "backlog/version"
require_relative "backlog/errors"
require_relative "backlog/validate"
require_relative "backlog/sql"
require_relative "backlog/driver"
require_relative "backlog/session"
require_relative "backlog/job"
require_relative "backlog/producer"
require_relative "backlog/client"
require_relative "backlog/worker"
