//! Property tests of the runtime's parser of outside input, cron expressions: any text gets an
//! answer (never a panic), and a schedule that is accepted names ticks at or before now.

use backlog::Schedule;
use proptest::prelude::*;

fn field(max: u32) -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_owned()),
        (0..=max).prop_map(|n| n.to_string()),
        (1..=max.max(1)).prop_map(|n| format!("*/{n}")),
        (0..=max, 0..=max).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn any_text_gets_an_answer(s in "[0-9*/,\\- A-Za-z?#LW]{0,30}", now in any::<i64>()) {
        if let Ok(schedule) = Schedule::cron(&s)
            && let Some(t) = schedule.last_tick(now)
        {
            prop_assert!(t <= now);
        }
    }

    #[test]
    fn five_field_expressions_are_read(
        min in field(59), hour in field(23), dom in field(28).prop_map(|f| f.replace('0', "1")),
        month in field(12).prop_map(|f| f.replace('0', "1")), dow in field(6),
        now in 0i64..4_102_444_800_000_000,
    ) {
        let expr = format!("{min} {hour} {dom} {month} {dow}");
        match Schedule::cron(&expr) {
            Ok(s) => {
                if let Some(t) = s.last_tick(now) {
                    prop_assert!(t <= now, "{expr}: tick {t} after {now}");
                }
            }
            // A range or step the cron parser refuses (e.g. a step past its field) says why.
            Err(e) => prop_assert!(e.to_string().contains("cron expression"), "{e}"),
        }
    }
}
