# frozen_string_literal: true

# Copies the catalog's statements this gem carries (lib/backlog/sql/<dialect>/<name>.sql) from
# crates/backlog-sql/queries, byte for byte; with --check, only says which differ (exit 1).
# backlog's contract test (crates/backlog-cli/tests/ruby_contract.rs) fails when one differs.
#
#     ruby clients/ruby/script/queries.rb [--check]

root = File.expand_path("..", __dir__)
catalog = File.expand_path("../../crates/backlog-sql/queries", root)
check = ARGV.include?("--check")
stale = Dir.glob("#{root}/lib/backlog/sql/*/*.sql").sort.reject do |copy|
  source = File.join(catalog, copy.delete_prefix("#{root}/lib/backlog/sql/"))
  same = File.binread(source) == File.binread(copy)
  File.binwrite(copy, File.binread(source)) unless same || check
  same
end
stale.each { |f| puts "#{check ? 'differs' : 'copied'}: #{f.delete_prefix("#{root}/")}" }
exit(check && !stale.empty? ? 1 : 0)
