#![allow(missing_docs)]
//! Property tests of every parser of outside input in the core: whatever the text, each one
//! answers (never panics), accepts exactly what its rule allows, and what it accepts reads back
//! as it was given.

use std::time::Duration;

use backlog_core::*;
use proptest::prelude::*;

fn name_rule(s: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// Any text, weighted towards what parsers meet: ASCII, punctuation, long runs, and any char.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9_.:-]{0,140}",
        "[ -~]{0,64}",
        ".{0,64}",
        "[a-z0-9 ]{0,8}(ms|s|m|h|d|w|y|parsecs|)",
        // JSON strings of escaped backslashes, NUL escapes and look-alikes.
        r#""(\\\\|\\u0000|u0000|\\n|a){0,6}""#,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn queue_names_and_kinds_follow_their_rule(s in text()) {
        prop_assert_eq!(QueueName::new(s.clone()).is_ok(), name_rule(&s));
        prop_assert_eq!(Kind::new(s.clone()).is_ok(), name_rule(&s));
        if let Ok(q) = QueueName::new(s.clone()) {
            prop_assert_eq!(q.as_str(), s.as_str());
            prop_assert_eq!(s.parse::<QueueName>().unwrap(), q);
        }
    }

    #[test]
    fn unique_keys_are_1_to_255_bytes_without_nul(s in ".{0,300}") {
        prop_assert_eq!(
            UniqueKey::new(s.clone()).is_ok(),
            (1..=MAX_UNIQUE_KEY_LEN).contains(&s.len()) && !s.contains('\0')
        );
    }

    #[test]
    fn payloads_are_json_within_the_limit(s in text(), limit in 0usize..80) {
        let value = serde_json::from_str::<serde_json::Value>(&s).ok();
        let json = value.is_some();
        let nul = value.as_ref().is_some_and(has_nul);
        match Payload::parse(s.clone(), limit) {
            Ok(p) => {
                prop_assert!(json && !nul && s.len() <= limit);
                prop_assert_eq!(p.as_str(), s.as_str());
            }
            Err(Error::PayloadTooLarge { size, limit: l }) => {
                prop_assert!(size > l && l == limit && size == s.len());
            }
            Err(Error::PayloadInvalid { .. }) => prop_assert!(!json || nul),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    #[test]
    fn json_values_round_trip_as_payloads(v in json_value()) {
        // NUL is refused (PostgreSQL's jsonb cannot store it); everything else goes in and
        // comes back the same.
        match Payload::from_value(&v, DEFAULT_PAYLOAD_LIMIT) {
            Ok(p) => {
                prop_assert!(!has_nul(&v));
                let back: serde_json::Value = serde_json::from_str(p.as_str()).unwrap();
                prop_assert_eq!(back, v);
                prop_assert!(Payload::parse(p.as_str(), DEFAULT_PAYLOAD_LIMIT).is_ok());
            }
            Err(e) => prop_assert!(has_nul(&v), "{e}"),
        }
    }

    #[test]
    fn durations_parse_or_say_why(s in text()) {
        match parse_duration(&s) {
            Ok(d) => {
                prop_assert!(d <= Duration::from_secs(10 * 366 * 86_400));
                // What is printed reads back as the same duration.
                prop_assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
            }
            Err(Error::DurationInvalid { input, reason }) => {
                prop_assert_eq!(input, s);
                prop_assert!(!reason.is_empty());
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    #[test]
    fn durations_read_their_number_and_unit(n in 1u64..80_000, unit in 0usize..4) {
        let (suffix, secs) = [("ms", 0), ("s", 1), ("m", 60), ("h", 3600)][unit];
        let d = parse_duration(&format!("{n}{suffix}")).unwrap();
        let want = if secs == 0 { Duration::from_millis(n) } else { Duration::from_secs(n * secs) };
        prop_assert_eq!(d, want);
    }

    #[test]
    fn states_orderings_and_retentions_read_only_their_names(s in text()) {
        let states = ["available", "running", "completed", "dead", "cancelled", "held"];
        prop_assert_eq!(s.parse::<JobState>().is_ok(), states.contains(&s.as_str()));
        if let Ok(st) = s.parse::<JobState>() {
            prop_assert_eq!(st.as_str(), s.as_str());
        }
        let _ = s.parse::<StateFilter>();
        prop_assert_eq!(s.parse::<Ordering>().is_ok(), ["fifo", "lifo"].contains(&s.as_str()));
        prop_assert_eq!(
            s.parse::<Retention>().is_ok(),
            ["delete", "keep", "archive"].contains(&s.as_str())
        );
    }

    #[test]
    fn trace_contexts_accept_exactly_version_00_form(
        trace in "[0-9a-f]{32}", parent in "[0-9a-f]{16}", flags in "[0-9a-f]{2}",
        state in proptest::option::of("[ -~]{0,40}"),
    ) {
        let tp = format!("00-{trace}-{parent}-{flags}");
        let zero = |s: &str| s.bytes().all(|b| b == b'0');
        match TraceContext::new(&tp, state.as_deref()) {
            Ok(tc) => {
                prop_assert!(!zero(&trace) && !zero(&parent));
                prop_assert_eq!(tc.traceparent(), tp.as_str());
                prop_assert_eq!(tc.trace_id(), trace.as_str());
                prop_assert_eq!(tc.parent_id(), parent.as_str());
                prop_assert_eq!(TraceContext::from_json(&tc.to_json()), Some(tc));
            }
            Err(_) => prop_assert!(zero(&trace) || zero(&parent)),
        }
    }

    #[test]
    fn trace_contexts_refuse_anything_else(s in text(), state in proptest::option::of(text())) {
        // Whatever the text: an answer, and an accepted one is well formed.
        if let Ok(tc) = TraceContext::new(&s, state.as_deref()) {
            prop_assert_eq!(tc.traceparent().len(), 55);
            prop_assert!(TraceContext::new(tc.traceparent(), tc.tracestate()).is_ok());
        }
        // A stored value reads as a valid context or as none.
        if let Some(tc) = TraceContext::from_json(&s) {
            prop_assert!(TraceContext::new(tc.traceparent(), tc.tracestate()).is_ok());
        }
    }
}

/// Whether a JSON value holds a NUL character in any string or key.
fn has_nul(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::String(s) => s.contains('\0'),
        serde_json::Value::Array(a) => a.iter().any(has_nul),
        serde_json::Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        ".{0,12}".prop_map(serde_json::Value::from),
        "[\\\\u0\0\"]{0,10}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}
