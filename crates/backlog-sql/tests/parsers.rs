#![allow(missing_docs)]
//! Property tests of the database URL handling: any text gets an answer, and a password never
//! shows in what is printed, whatever characters it has.

use backlog_sql::{redact_url, url_scheme};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn schemes_are_read_or_refused(s in ".{0,40}", scheme in "(sqlite|postgres|postgresql|mysql|mariadb|http|)") {
        let url = format!("{scheme}:{s}");
        let known = ["sqlite", "postgres", "postgresql", "mysql", "mariadb"].contains(&scheme.as_str());
        prop_assert_eq!(url_scheme(&url).is_ok(), known);
        let _ = url_scheme(&s);
    }

    #[test]
    fn passwords_never_show(
        scheme in "(postgres|mysql|mariadb|sqlite)",
        user in "[a-z][a-z0-9_]{0,8}",
        // A password with a marker no other part has, and any printable characters.
        password in "[ -~]{0,16}".prop_map(|p| format!("Zq{p}Zq")),
        host in "[a-z0-9.-]{1,12}(:[0-9]{1,5})?",
        tail in "(/[a-z0-9_]{0,8})?(\\?[ -~]{0,20})?",
    ) {
        let url = format!("{scheme}://{user}:{password}@{host}{tail}");
        let shown = redact_url(&url);
        prop_assert!(!shown.contains(&password), "{url} shown as {shown}");
        prop_assert!(shown.starts_with(&format!("{scheme}://{user}:")), "{shown}");
    }

    #[test]
    fn redaction_answers_anything(s in ".{0,60}") {
        let shown = redact_url(&s);
        // Only a password is ever replaced; text without "://" and "@" is shown as it is.
        if !s.contains("://") || !s.contains('@') {
            prop_assert_eq!(shown, s);
        }
    }
}
