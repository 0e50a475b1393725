# frozen_string_literal: true

require_relative "lib/backlog/version"

Gem::Specification.new do |s|
  s.name = "backlog"
  # The minor version follows the SQL schema version this client speaks (docs/sql.md "Version").
  s.version = Backlog::VERSION
  s.summary = "Producer, worker and Active Job adapter for backlog job queues over SQL " \
              "(SQLite, PostgreSQL, MySQL/MariaDB) or HTTP"
  s.description = "Enqueues on the application's own connection inside its transaction, " \
                  "works queues with batch claims, heartbeats and fenced outcomes, speaks " \
                  "backlog serve's HTTP API, and runs Active Job on backlog."
  s.authors = ["backlog contributors"]
  s.licenses = ["MIT", "Apache-2.0"]
  s.required_ruby_version = ">= 3.0"
  s.files = Dir["lib/**/*.rb", "lib/backlog/sql/*/*.sql", "examples/*.rb", "script/*.rb", "README.md"]
  s.require_paths = ["lib"]
  # The drivers are required when first used; install the ones you need. No runtime
  # dependency is declared, so that an installation from Debian's packages (ruby-pg,
  # ruby-mysql2, ruby-sqlite3, ruby-activejob) needs nothing from the gem registry.
  s.requirements << "pg (PostgreSQL), mysql2 (MySQL/MariaDB) or sqlite3 (SQLite 3.38+)"
  s.requirements << "activejob 6.1+ for backlog/active_job"
  s.metadata["rubygems_mfa_required"] = "true"
end
