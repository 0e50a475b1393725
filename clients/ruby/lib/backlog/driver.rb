# frozen_string_literal: true

require "uri"

module Backlog
  # What differs between the databases' Ruby drivers (pg, mysql2, sqlite3): running a catalog
  # statement with its values bound, reading rows as arrays, counting affected rows,
  # transactions, and which driver errors mean a missing schema or a deadlock. A driver wraps
  # either a connection this gem opened (`Driver.open(url)`: statements are prepared once and
  # kept) or one the application owns (`Driver.wrap(conn)`: nothing about it is changed).
  module Driver
    module_function

    # The driver of a connection the application owns: a PG::Connection, a Mysql2::Client or
    # an SQLite3::Database.
    def wrap(conn)
      case conn.class.name
      when "PG::Connection" then Postgres.new(conn, own: false)
      when "Mysql2::Client" then Mysql.new(conn, own: false)
      when "SQLite3::Database" then Sqlite.new(conn, own: false)
      when /\ABacklog::Driver::/ then conn
      else
        raise ArgumentError, "expected a PG::Connection, Mysql2::Client or SQLite3::Database, not #{conn.class}"
      end
    end

    # A connection of its own to the database a URL names: sqlite:///absolute/path.db or
    # sqlite://relative.db, postgres://user@host:5432/db (libpq's URL, as it is), or
    # mysql://user:password@host:3306/db.
    def open(url)
      case url
      when %r{\Asqlite://} then Sqlite.connect(url.delete_prefix("sqlite://").split("?", 2)[0])
      when %r{\Apostgres(ql)?://} then Postgres.connect(url)
      when %r{\A(mysql|mariadb)://} then Mysql.connect(url)
      else raise ArgumentError, "expected sqlite://PATH, postgres://... or mysql://..., not #{url.inspect}"
      end
    end

    # The common part: the flavor's statements, and integers and booleans read back from any
    # driver's values.
    class Base
      attr_reader :raw, :flavor

      def initialize(raw, own:)
        @raw, @own = raw, own
      end

      def own? = @own

      # The rows of the catalog statement `name` run with `binds` (arrays of values).
      def query(name, binds = [], **fill)
        rows(Sql.statement(flavor, name, **fill), binds)
      end

      # The number of rows the catalog statement `name` affected (matched, on MySQL: found rows).
      def exec(name, binds = [], **fill)
        affected(Sql.statement(flavor, name, **fill), binds)
      end

      def transient?(_err) = false

      def self.int(v) = v.nil? ? nil : Integer(v)

      def self.bool(v) = [true, 1, "t", "1", "true"].include?(v)
    end

    # PostgreSQL through pg: statements keep their `$n`.
    class Postgres < Base
      def self.connect(url)
        require "pg"
        # Nothing to set (docs/sql.md "Session settings"); backlog.notify is left alone so that
        # inserts wake backlog's workers through the trigger.
        new(PG.connect(url), own: true)
      end

      def initialize(raw, own:)
        super
        @flavor = "postgres"
        @prepared = {}
        @strings = PG::TypeMapAllStrings.new
      end

      def run(sql, binds)
        if own?
          name = @prepared[sql] ||= begin
            n = "backlog_#{@prepared.size}"
            raw.prepare(n, sql)
            n
          end
          raw.exec_prepared(name, binds)
        else
          res = raw.exec_params(sql, binds)
          res.type_map = @strings # whatever type map the application set: text, read here
          res
        end
      end

      def rows(sql, binds) = run(sql, binds).values

      def affected(sql, binds) = run(sql, binds).cmd_tuples

      def transaction(&block) = raw.transaction(&block)

      def in_transaction? = raw.transaction_status != PG::PQTRANS_IDLE

      def schema_missing?(err) = err.is_a?(PG::UndefinedTable)

      def transient?(err) = err.is_a?(PG::TRDeadlockDetected) || err.is_a?(PG::TRSerializationFailure)

      # An array parameter, as text (`{1,2}`, `{"a",NULL}`).
      def array(values) = PG::TextEncoder::Array.new.encode(values)

      def close = raw.close
    end

    # MySQL and MariaDB through mysql2's prepared statements: statements keep their `?`.
    class Mysql < Base
      def self.connect(url)
        require "mysql2"
        u = URI.parse(url)
        raw = Mysql2::Client.new(
          host: u.host || "127.0.0.1", port: u.port || 3306,
          username: URI.decode_www_form_component(u.user || "root"),
          password: URI.decode_www_form_component(u.password || ""),
          database: URI.decode_www_form_component(u.path.delete_prefix("/")),
          encoding: "utf8mb4",
          # FOUND_ROWS: an UPDATE reports the rows its WHERE matched, so a fenced statement
          # that writes values a row already has still counts 1 (docs/sql.md "Session settings").
          flags: Mysql2::Client::FOUND_ROWS
        )
        # READ COMMITTED: no gap locks between claimers and producers. UTC: NOW(6) in the
        # column defaults has no daylight-saving hour that maps to two instants.
        raw.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        raw.query("SET time_zone = '+00:00'")
        new(raw, own: true)
      end

      def initialize(raw, own:)
        super
        @flavor = "mysql"
        @stmts = {}
      end

      # Runs `sql`; yields the statement (for its counts) and returns the rows, if any.
      def run(sql, binds)
        stmt = own? ? cached(sql) : raw.prepare(sql)
        begin
          res = stmt.execute(*binds, as: :array, cast_booleans: false, database_timezone: :utc)
          out = res ? res.to_a : []
          yield stmt if block_given?
          out
        ensure
          stmt.close unless own?
        end
      end

      def cached(sql)
        @stmts[sql] ||= begin
          if @stmts.size >= 128
            @stmts.each_value(&:close)
            @stmts.clear
          end
          raw.prepare(sql)
        end
      end

      def rows(sql, binds) = run(sql, binds)

      def affected(sql, binds)
        n = 0
        run(sql, binds) { |s| n = s.affected_rows }
        n
      end

      # Runs an INSERT; returns [rows affected, the first new id].
      def insert(sql, binds)
        out = nil
        run(sql, binds) { |s| out = [s.affected_rows, s.last_id] }
        out
      end

      def transaction
        raw.query("BEGIN")
        begin
          out = yield
        rescue Exception # rubocop:disable Lint/RescueException - rolled back, then re-raised
          raw.query("ROLLBACK")
          raise
        end
        raw.query("COMMIT")
        out
      end

      # mysql2 cannot tell: unknown.
      def in_transaction? = nil

      def schema_missing?(err) = err.is_a?(Mysql2::Error) && err.error_number == 1146

      # 1213 deadlock (InnoDB rolled the transaction back), 1205 lock wait timeout.
      def transient?(err) = err.is_a?(Mysql2::Error) && [1213, 1205].include?(err.error_number)

      def close
        @stmts.each_value(&:close)
        raw.close
      end
    end

    # SQLite through sqlite3: statements keep their `?n`.
    class Sqlite < Base
      def self.connect(path)
        require "sqlite3"
        # sqlite3 would create an empty file: there is no schema there.
        raise SchemaMissing, "#{path}: no such database file (run `backlog migrate`)" unless File.exist?(path)

        raw = SQLite3::Database.new(path)
        # A busy handler that sleeps in Ruby, not busy_timeout: sqlite3 holds Ruby's lock while
        # it waits in C, which would stop this process's other threads, the writer among them.
        raw.busy_handler do |count|
          sleep(count < 10 ? 0.001 : 0.005)
          count < 6000 # about 30 s
        end
        raw.execute("PRAGMA journal_mode = WAL")
        raw.execute("PRAGMA synchronous = FULL")
        new(raw, own: true)
      end

      def initialize(raw, own:)
        super
        @flavor = "sqlite"
        @stmts = {}
      end

      def rows(sql, binds)
        stmt = own? ? (@stmts[sql] ||= raw.prepare(sql)) : raw.prepare(sql)
        begin
          stmt.reset!
          # Text, not BLOB: sqlite3 binds a String of binary encoding (Socket.gethostname's,
          # say) as a BLOB, which backlog cannot read as text.
          stmt.bind_params(binds.map { |v| v.is_a?(String) && v.encoding == Encoding::BINARY ? v.dup.force_encoding(Encoding::UTF_8) : v })
          out = []
          # #step gives arrays whatever results_as_hash the application chose.
          while (row = stmt.step)
            out << row
          end
          out
        ensure
          own? ? stmt.reset! : stmt.close
        end
      end

      def affected(sql, binds)
        rows(sql, binds)
        raw.changes
      end

      # Runs an INSERT; returns [rows affected, the last new id].
      def insert(sql, binds)
        rows(sql, binds)
        [raw.changes, raw.last_insert_row_id]
      end

      # IMMEDIATE: the write lock at BEGIN, so a transaction never fails to upgrade halfway.
      def transaction
        raw.execute("BEGIN IMMEDIATE")
        begin
          out = yield
        rescue Exception # rubocop:disable Lint/RescueException - rolled back, then re-raised
          raw.execute("ROLLBACK")
          raise
        end
        raw.execute("COMMIT")
        out
      end

      def in_transaction? = raw.transaction_active?

      def schema_missing?(err) = err.is_a?(SQLite3::SQLException) && err.message.include?("no such table")

      def transient?(err) = err.is_a?(SQLite3::BusyException)

      def close
        @stmts.each_value(&:close)
        raw.close
      end
    end
  end
end
