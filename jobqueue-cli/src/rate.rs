//! A rate limit as the command line gives it: `STARTS/PERIOD`, read by
//! the library (`FromStr for RateLimit`), so the command line and the
//! dashboard take the same text.

use jobqueue_core::RateLimit;

/// `STARTS/PERIOD`, e.g. `50/1s`, `100/1m`, `10/250ms`; a period without a
/// number means one of its unit (`50/s`).
pub(crate) fn parse_rate(text: &str) -> Result<RateLimit, String> {
    text.parse()
        .map_err(|e: jobqueue_core::Error| e.to_string())
}
