# frozen_string_literal: true

module Backlog
  # The library's statements: lib/backlog/sql/<dialect>/<name>.sql are copies, byte for byte,
  # of crates/backlog-sql/queries/<dialect>/<name>.sql (backlog's test suite fails when a copy
  # and its file differ, crates/backlog-cli/tests/ruby_contract.rs). The drivers take the
  # files' own placeholders (pg `$n`, sqlite3 `?n`, mysql2 `?`), so nothing is rewritten; the
  # only text ever filled in is a list marker a file declares: `/*IDS*/` (`-- @list`) becomes
  # one `?` per id, and `/*ROWS*/` (`-- @rows`) one `(?, ...)` per row.
  module Sql
    DIR = File.expand_path("sql", __dir__)
    FLAVORS = %w[sqlite postgres mysql].freeze
    @texts = {}
    @filled = {}
    @lock = Mutex.new

    module_function

    # The file `flavor/name.sql` as it is.
    def text(flavor, name)
      key = "#{flavor}/#{name}"
      @lock.synchronize do
        @texts[key] ||= File.read(File.join(DIR, flavor, "#{name}.sql")).freeze
      end
    end

    # The statement with its list markers filled in: `lists` maps a marker's name to its count
    # of placeholders (`{"IDS" => 3}`: /*IDS*/ becomes `?, ?, ?`), and /*ROWS*/ becomes `rows`
    # rows of `width` placeholders each.
    def statement(flavor, name, lists: nil, rows: 0, width: 0)
      return text(flavor, name) if lists.nil? && rows.zero?

      key = [flavor, name, lists, rows, width]
      hit = @lock.synchronize { @filled[key] }
      return hit if hit

      sql = text(flavor, name)
      lists&.each { |marker, n| sql = sql.sub("/*#{marker}*/") { Array.new(n, "?").join(", ") } }
      if rows.positive?
        row = "(#{Array.new(width, '?').join(', ')})"
        sql = sql.sub("/*ROWS*/") { Array.new(rows, row).join(", ") }
      end
      sql.freeze
      @lock.synchronize do
        @filled.clear if @filled.size > 256
        @filled[key] = sql
      end
    end

    # Every file this gem carries, as "flavor/name.sql" (what the contract test compares).
    def files
      Dir.glob(File.join(DIR, "*", "*.sql")).map { |f| f.delete_prefix("#{DIR}/") }.sort
    end
  end
end
