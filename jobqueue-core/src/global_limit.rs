//! A queue's global limit: at most N of its jobs held (claimed or
//! running) at once by all runners together.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// Most jobs of a queue held at once, fleet-wide: 1 to `i32::MAX`
/// ([`crate::set_queue_limit`], [`crate::QueueConfig::limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GlobalLimit {
    most: u32,
}

impl GlobalLimit {
    /// At most `most` jobs held at once; 0 is no limit (to stop a queue,
    /// pause it) and is [`Error::InvalidOption`], as is more than
    /// `i32::MAX`.
    pub fn new(most: u32) -> Result<Self> {
        if most == 0 || i32::try_from(most).is_err() {
            return Err(not_a_limit(most));
        }
        Ok(GlobalLimit { most })
    }

    /// The most jobs held at once.
    pub fn most(&self) -> u32 {
        self.most
    }

    /// As stored (`global_limit`): within `i32` by construction.
    pub(crate) fn stored(&self) -> i32 {
        i32::try_from(self.most).unwrap_or(i32::MAX)
    }
}

impl fmt::Display for GlobalLimit {
    /// The number; reads back with [`FromStr`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.most)
    }
}

impl TryFrom<i64> for GlobalLimit {
    type Error = Error;

    /// A count as given (a command line's): 1 or more.
    fn try_from(n: i64) -> Result<Self> {
        // Out of `u32`, out of range: named as given, not as clamped.
        u32::try_from(n)
            .map_err(|_| not_a_limit(n))
            .and_then(GlobalLimit::new)
    }
}

impl FromStr for GlobalLimit {
    type Err = Error;

    /// A whole number, 1 or more (`5`).
    fn from_str(text: &str) -> Result<Self> {
        let text = text.trim();
        match text.parse::<i64>() {
            Ok(n) => GlobalLimit::try_from(n),
            Err(_) => Err(invalid(format!(
                "`{text}` is not a whole number: give the most jobs held at once by all runners \
                 together, e.g. 5 (to lift the limit, remove it)"
            ))),
        }
    }
}

/// `n`, given as a limit, refused: what a limit is, and what to do instead.
fn not_a_limit(n: impl fmt::Display) -> Error {
    invalid(format!(
        "{n} is not a limit: give at least 1 and at most {} (to stop a queue, pause it; to \
         lift the limit, remove it)",
        i32::MAX
    ))
}

fn invalid(reason: String) -> Error {
    Error::invalid("queue limit", reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_one_or_more_and_reads_back() {
        assert_eq!("5".parse::<GlobalLimit>().expect("5").most(), 5);
        assert_eq!(GlobalLimit::new(7).expect("7").to_string(), "7");
        for (text, says) in [
            ("0", "0 is not a limit"),
            ("-3", "-3 is not a limit"),
            ("many", "is not a whole number"),
            (
                "3000000000",
                "3000000000 is not a limit: give at least 1 and at most 2147483647",
            ),
        ] {
            let error = text.parse::<GlobalLimit>().expect_err(text).to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
