//! Durations written for people, the same in every place that shows one
//! (the command line, the doctor, the dashboard).

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

#[cfg(test)]
mod tests {
    use super::*;

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
