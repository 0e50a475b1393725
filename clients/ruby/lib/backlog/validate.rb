# frozen_string_literal: true

require "json"

module Backlog
  # Checks of what a producer passes, with backlog's own limits (crates/backlog-core,
  # validate.rs and trace.rs), so that a job this gem writes is one backlog can list, claim and
  # administer. Everything is checked before a statement or request is sent.
  module Validate
    # Longest queue name or kind, in bytes (backlog_core::MAX_NAME_LEN).
    MAX_NAME_LEN = 128
    # Longest unique key or group key, in bytes (backlog_core::MAX_UNIQUE_KEY_LEN).
    MAX_KEY_LEN = 255
    # Largest payload, in bytes of JSON (backlog_core::DEFAULT_PAYLOAD_LIMIT).
    PAYLOAD_LIMIT = 1024 * 1024
    # Longest tracestate, in bytes (backlog_core::MAX_TRACESTATE_LEN).
    MAX_TRACESTATE_LEN = 512
    SMALLINT = (-32_768..32_767).freeze
    INT_MAX = (2**31) - 1
    NAME = /\A[A-Za-z0-9_.:-]+\z/.freeze

    module_function

    # A queue name or kind: 1 to 128 characters of [A-Za-z0-9_.:-].
    def name(what, value)
      raise InvalidName.new(what, value.inspect, "must be a string") unless value.is_a?(String) || value.is_a?(Symbol)

      value = value.to_s
      raise InvalidName.new(what, value, "must not be empty") if value.empty?
      raise InvalidName.new(what, value, "must be at most 128 characters") if value.bytesize > MAX_NAME_LEN
      raise InvalidName.new(what, value, "only letters, digits and _ - . : are allowed") unless NAME.match?(value)

      value
    end

    # A unique key or group key: 1 to 255 bytes of UTF-8, any characters but NUL.
    def key(what, value)
      raise InvalidName.new(what, value.inspect, "must be a string") unless value.is_a?(String)
      raise InvalidName.new(what, value, "must not be empty") if value.empty?
      raise InvalidName.new(what, value, "must be at most 255 bytes") if value.bytesize > MAX_KEY_LEN
      raise InvalidName.new(what, value, "must be UTF-8") unless utf8?(value)
      raise InvalidName.new(what, value, "must not contain NUL") if value.include?("\0")

      value
    end

    # The payload as JSON text: a JSON value (Hash, Array, String, Integer, finite Float, true,
    # false, nil; Symbols as strings), at most 1 MiB, UTF-8, no NUL. Anything else (an object
    # JSON would turn into its #to_s) is refused rather than guessed at.
    def payload(value, what = "payload")
      json_value!(value, what, 0)
      text = JSON.generate(value) # raises on NaN, infinity and strings that are not UTF-8
      if text.bytesize > PAYLOAD_LIMIT
        raise InvalidPayload, "the #{what} is #{text.bytesize} bytes of JSON; the limit is #{PAYLOAD_LIMIT}"
      end
      raise InvalidPayload, "\\u0000 is not allowed in a #{what}" if text.include?("\\u0000") && NUL_ESCAPE.match?(text)

      text
    rescue JSON::GeneratorError, EncodingError => e
      raise InvalidPayload, "the #{what} is not JSON: #{e.message}"
    end

    # A \u0000 escape that is not itself an escaped backslash followed by "u0000".
    NUL_ESCAPE = /(?<!\\)(?:\\\\)*\\u0000/.freeze

    # Only the types JSON has (the text itself is checked by JSON.generate).
    def json_value!(value, what, depth)
      case value
      when String, Integer, nil, true, false, Symbol then nil
      when Float
        raise InvalidPayload, "the #{what} is not JSON: #{value} has no JSON form" unless value.finite?
      when Hash
        raise InvalidPayload, "the #{what} nests deeper than 100 levels" if depth > 100

        value.each_pair do |k, v|
          raise InvalidPayload, "the #{what} is not JSON: key #{k.inspect} is not a string" unless k.is_a?(String) || k.is_a?(Symbol)

          json_value!(v, what, depth + 1) unless v.is_a?(String) || v.is_a?(Integer)
        end
      when Array
        raise InvalidPayload, "the #{what} nests deeper than 100 levels" if depth > 100

        value.each { |v| json_value!(v, what, depth + 1) unless v.is_a?(String) || v.is_a?(Integer) }
      else
        raise InvalidPayload, "the #{what} is not JSON: #{value.class} has no JSON form"
      end
    end

    def utf8?(s)
      s.encoding == Encoding::UTF_8 ? s.valid_encoding? : s.dup.force_encoding(Encoding::UTF_8).valid_encoding?
    end

    def int(what, value)
      raise InvalidOption, "#{what} must be an integer, not #{value.inspect}" unless value.is_a?(Integer)

      value
    end

    # A priority: SMALLINT, lower runs first.
    def priority(value)
      p = int("priority", value)
      raise InvalidOption, "priority must be between -32768 and 32767, not #{p}" unless SMALLINT.cover?(p)

      p
    end

    # A job's own attempt limit: 1 to 2^31 - 1.
    def max_attempts(value)
      m = int("max_attempts", value)
      raise InvalidOption, "max_attempts must be between 1 and #{INT_MAX}, not #{m}" unless (1..INT_MAX).cover?(m)

      m
    end

    # run_at in microseconds since the epoch: an Integer as it is, or a Time.
    def instant_us(value)
      return (value.to_r * 1_000_000).floor if value.is_a?(Time)

      us = int("run_at", value)
      raise InvalidOption, "run_at must be microseconds since the epoch, not #{us}" unless us >= 0 && us < 2**63

      us
    end

    # A delay in microseconds: seconds (Integer, Float, or anything with #to_f such as an
    # ActiveSupport::Duration), not negative.
    def delay_us(value)
      secs = case value
             when Integer, Float then value
             else
               raise InvalidOption, "delay must be seconds, not #{value.inspect}" unless value.respond_to?(:to_f) && !value.is_a?(String)

               value.to_f
             end
      raise InvalidOption, "delay must be a finite number of seconds, not #{value.inspect}" if secs.is_a?(Float) && !secs.finite?
      raise InvalidOption, "delay must not be negative, not #{value.inspect}" if secs.negative?

      (secs * 1_000_000).to_i
    end

    def hex?(s, len)
      s.length == len && /\A[0-9a-f]+\z/.match?(s)
    end

    # A W3C trace context as the trace_context column stores it: the traceparent, or
    # {traceparent:, tracestate:} (backlog_core::TraceContext, the same checks). JSON text.
    def trace_context(value)
      case value
      when String then parent, state = value, nil
      when Hash
        h = value.transform_keys(&:to_s)
        unknown = h.keys - %w[traceparent tracestate]
        raise InvalidOption, "trace_context has unknown keys #{unknown.sort}" unless unknown.empty?

        parent, state = h["traceparent"], h["tracestate"]
        raise InvalidOption, "trace_context needs a traceparent string" unless parent.is_a?(String)
        raise InvalidOption, "tracestate must be a string" unless state.nil? || state.is_a?(String)
      else
        raise InvalidOption, "trace_context must be a traceparent or a Hash, not #{value.inspect}"
      end
      fields = parent.strip.split("-", 5)
      if fields.length < 4
        raise InvalidOption, "traceparent must be 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"
      end

      version, trace_id, parent_id, flags = fields
      raise InvalidOption, "traceparent version must be two lower-case hex digits, not ff" if !hex?(version, 2) || version == "ff"
      raise InvalidOption, "a version 00 traceparent has exactly four fields" if version == "00" && fields.length > 4
      raise InvalidOption, "trace id must be 32 lower-case hex digits, not all zero" if !hex?(trace_id, 32) || trace_id.delete("0").empty?
      raise InvalidOption, "parent id must be 16 lower-case hex digits, not all zero" if !hex?(parent_id, 16) || parent_id.delete("0").empty?
      raise InvalidOption, "trace flags must be two lower-case hex digits" unless hex?(flags, 2)

      carrier = { "traceparent" => "00-#{trace_id}-#{parent_id}-#{flags}" }
      state = state&.strip
      if state && !state.empty?
        raise InvalidOption, "tracestate must be at most 512 bytes" if state.bytesize > MAX_TRACESTATE_LEN
        raise InvalidOption, "tracestate must be printable ASCII" unless state.each_char.all? { |c| c.ord >= 0x20 && c.ord < 0x7f }

        carrier["tracestate"] = state
      end
      JSON.generate(carrier)
    end
  end
end
