//! How the doctor writes figures into its evidence.

use std::time::Duration;

/// A duration from seconds as the database gives them (never negative).
pub(crate) fn secs(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO)
}

/// A size on disk, in PostgreSQL's units: `512 bytes`, `16 kB`, `2.4 MB`.
pub(crate) fn bytes(bytes: f64) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if bytes < 1024.0 {
        return format!("{} bytes", bytes.max(0.0).round());
    }
    let mut value = bytes / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value < 10.0 {
        format!("{value:.1} {}", UNITS[unit])
    } else {
        format!("{value:.0} {}", UNITS[unit])
    }
}

/// A fraction (0 to 1) as a percentage with two significant digits below
/// 10 %: `0 %`, `0.028 %`, `4.5 %`, `80 %`.
pub(crate) fn percent(fraction: f64) -> String {
    let percent = fraction * 100.0;
    if percent == 0.0 || !percent.is_finite() {
        return format!("{percent} %");
    }
    if percent >= 10.0 {
        return format!("{percent:.0} %");
    }
    // Digits after the point for two significant ones (at most 6).
    let digits = (1.0 - percent.abs().log10().floor()).clamp(0.0, 6.0) as usize;
    format!("{percent:.digits$} %")
}

/// A statement's text on one line, at most 80 characters, without its
/// final semicolon.
pub(crate) fn query(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = line.trim_end_matches(|c: char| c == ';' || c.is_whitespace());
    if line.chars().count() <= 80 {
        line.to_owned()
    } else {
        let cut: String = line.chars().take(79).collect();
        format!("{cut}…")
    }
}

/// `text` as an SQL string literal, for statements given as advice.
pub(crate) fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `items` joined by `, ` after the first `most`, with how many were left
/// out.
pub(crate) fn list(items: &[String], most: usize) -> String {
    let mut shown = items[..items.len().min(most)].join(", ");
    if items.len() > most {
        shown.push_str(&format!(" and {} more", items.len() - most));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(
            crate::human::human_duration(Duration::from_millis(200)),
            "200ms"
        );
        assert_eq!(
            crate::human::human_duration(Duration::from_secs(303)),
            "5m 03s"
        );
        assert_eq!(bytes(512.0), "512 bytes");
        assert_eq!(bytes(16_384.0), "16 kB");
        assert_eq!(bytes(2.4 * 1024.0 * 1024.0), "2.4 MB");
        assert_eq!(percent(0.0), "0 %");
        assert_eq!(percent(0.000_279), "0.028 %");
        assert_eq!(percent(0.045), "4.5 %");
        assert_eq!(percent(0.8), "80 %");
        assert_eq!(literal("it's"), "'it''s'");
        assert_eq!(query("SELECT\n  1;"), "SELECT 1");
        let items: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        assert_eq!(list(&items, 2), "a, b and 1 more");
    }
}
