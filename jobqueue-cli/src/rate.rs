//! A rate limit as the command line gives it: `STARTS/PERIOD`.

use jobqueue_core::RateLimit;

use crate::doctor::parse_duration;

/// `STARTS/PERIOD`, e.g. `50/1s`, `100/1m`, `10/250ms`; a period without a
/// number means one of its unit (`50/s`).
pub(crate) fn parse_rate(text: &str) -> Result<RateLimit, String> {
    let example = "write starts per period, e.g. 50/1s, 100/1m or 10/250ms";
    let Some((starts, period)) = text.trim().split_once('/') else {
        return Err(format!("`{text}` is not a rate: {example}"));
    };
    let starts: u32 = starts.trim().parse().map_err(|_| {
        format!("`{starts}` in `{text}` is not a whole number of starts: {example}")
    })?;
    let period = period.trim();
    let period = if period.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        parse_duration(period)?
    } else {
        parse_duration(&format!("1{period}"))?
    };
    RateLimit::new(starts, period).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn rates_read_as_starts_per_period() {
        let rate = |starts, period| RateLimit::new(starts, period).expect("a limit");
        assert_eq!(parse_rate("50/1s"), Ok(rate(50, Duration::from_secs(1))));
        assert_eq!(parse_rate("50/s"), Ok(rate(50, Duration::from_secs(1))));
        assert_eq!(parse_rate("100/1m"), Ok(rate(100, Duration::from_secs(60))));
        assert_eq!(
            parse_rate(" 10 / 250ms "),
            Ok(rate(10, Duration::from_millis(250)))
        );
        for bad in ["50", "0/1s", "-5/1s", "5/0s", "5/2d", "x/1s", "5/fortnight"] {
            assert!(parse_rate(bad).is_err(), "{bad} was taken");
        }
        let zero = parse_rate("0/1s").expect_err("zero");
        assert!(zero.contains("1 to 1000000"), "{zero}");
    }
}
