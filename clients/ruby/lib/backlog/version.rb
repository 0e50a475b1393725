# frozen_string_literal: true

module Backlog
  # The SQL schema version this client speaks (docs/sql.md "Version"). The gem's minor version
  # follows it; Client.new refuses an older schema (SchemaTooOld) or none (SchemaMissing).
  SCHEMA_VERSION = 20
  # The gem's version: 0.<schema version>.<patch>.
  VERSION = "0.#{SCHEMA_VERSION}.0"
end
