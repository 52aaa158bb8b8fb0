//! A key limit as the command line gives it: `5`, `5 per key` or
//! `ordered`, read by the library (`FromStr for KeyLimit`), so the command
//! line and the dashboard take the same text.

use jobqueue_core::KeyLimit;

/// `5`, `5 per key` (most jobs of one key at once), or `ordered` (one at
/// a time in enqueue order).
pub(crate) fn parse_key_limit(text: &str) -> Result<KeyLimit, String> {
    text.parse()
        .map_err(|e: jobqueue_core::Error| e.to_string())
}
