//! Durations for people: written the same in every place that shows one
//! (the command line, the doctor, the dashboard), and read the same in
//! every place that takes one (a rate limit's period, the doctor's
//! thresholds).

use std::time::Duration;

/// A duration for people: `850ms`, `12.3s`, `5m 03s`, `3h 05m`, `9d 04h`,
/// `25.9y`.
pub fn human_duration(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    let whole = duration.as_secs();
    match whole {
        0 => format!("{}ms", duration.as_millis()),
        1..60 => format!("{secs:.1}s"),
        60..3600 => format!("{}m {:02}s", whole / 60, whole % 60),
        3600..86_400 => format!("{}h {:02}m", whole / 3600, whole % 3600 / 60),
        86_400..31_557_600 => format!("{}d {:02}h", whole / 86_400, whole % 86_400 / 3600),
        _ => format!("{:.1}y", secs / 31_557_600.0),
    }
}

/// The units [`parse_duration`] names in its errors (it reads more: `sec`,
/// `min`, `hours`, `w`, ...).
const UNITS: &str = "ms, s, m, h, d";

/// A duration as people write it, read by `humantime`: numbers each with a
/// unit, `500ms`, `30s`, `5m`, `1.5h`, `1h 30m` (or `1h30m`), `2d`. The error says
/// what was wrong and what to write.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    humantime::parse_duration(text).map_err(|error| {
        let example = format!("write numbers each with a unit ({UNITS}), e.g. 30s, 5m or 1h 30m");
        match error {
            humantime::DurationError::Empty => format!("no duration given: {example}"),
            humantime::DurationError::UnknownUnit { unit, .. } if unit.is_empty() => {
                format!("`{text}` has no unit: {example}")
            }
            humantime::DurationError::UnknownUnit { unit, .. } => {
                format!("`{unit}` is not a unit: {example}")
            }
            humantime::DurationError::NumberOverflow => format!("`{text}` is too long a duration"),
            _ => format!("`{text}` is not a duration: {example}"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_numbers_with_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration(" 2d "), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        let cases = [
            ("", "no duration given"),
            ("30", "`30` has no unit"),
            ("5 parsecs", "`parsecs` is not a unit"),
            ("-5s", "`-5s` is not a duration"),
            ("1..5h", "`1..5h` is not a duration"),
        ];
        for (text, says) in cases {
            let error = parse_duration(text).expect_err(text);
            assert!(error.contains(says), "{text}: {error}");
            assert!(error.contains("e.g. 30s"), "{text}: {error}");
        }
    }

    #[test]
    fn each_range_has_its_unit() {
        let cases = [
            (Duration::from_millis(850), "850ms"),
            (Duration::from_millis(12_340), "12.3s"),
            (Duration::from_secs(303), "5m 03s"),
            (Duration::from_secs(3 * 3600 + 300), "3h 05m"),
            (Duration::from_secs(9 * 86_400 + 4 * 3600), "9d 04h"),
            (Duration::from_secs(26 * 31_557_600), "26.0y"),
        ];
        for (duration, text) in cases {
            assert_eq!(human_duration(duration), text);
        }
    }
}
