//! How long a failed job waits before its next attempt.

use std::time::Duration;

use crate::{Error, Result};

/// Exponential backoff with jitter, capped.
///
/// The delay after attempt `n` is `base * 2^(n-1)`, capped at `max`, then
/// multiplied by a random factor in `[1 - jitter, 1 + jitter]` (and capped
/// again), so jobs that failed together do not all come back together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Delay after the first failed attempt. Default 2 s.
    pub base: Duration,
    /// Longest delay. Default 1 hour.
    pub max: Duration,
    /// Relative spread of the random factor, in `[0, 1)`. Default 0.2.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl RetryPolicy {
    /// 2 s after the first failure, doubling to at most 1 hour, ±20 %.
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        base: Duration::from_secs(2),
        max: Duration::from_secs(3600),
        jitter: 0.2,
    };

    /// Checks the fields: `base <= max`, `jitter` in `[0, 1)`.
    pub fn validate(&self) -> Result<()> {
        if self.base > self.max {
            return Err(Error::invalid(
                "retry policy",
                format!("base {:?} is longer than max {:?}", self.base, self.max),
            ));
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return Err(Error::invalid(
                "retry policy",
                format!("jitter {} is outside [0, 1)", self.jitter),
            ));
        }
        Ok(())
    }

    /// The delay before the attempt after attempt number `attempt` (1-based).
    pub fn delay(&self, attempt: i32) -> Duration {
        let exponent = attempt.saturating_sub(1).clamp(0, 62);
        let max = self.max.as_secs_f64();
        let raw = (self.base.as_secs_f64() * 2f64.powi(exponent)).min(max);
        let factor = 1.0 + self.jitter * (2.0 * fastrand::f64() - 1.0);
        Duration::from_secs_f64((raw * factor).clamp(0.0, max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps() {
        let policy = RetryPolicy {
            base: Duration::from_secs(1),
            max: Duration::from_secs(10),
            jitter: 0.2,
        };
        for _ in 0..100 {
            let d1 = policy.delay(1).as_secs_f64();
            let d2 = policy.delay(2).as_secs_f64();
            let d3 = policy.delay(3).as_secs_f64();
            assert!((0.8..=1.2).contains(&d1), "{d1}");
            assert!((1.6..=2.4).contains(&d2), "{d2}");
            assert!((3.2..=4.8).contains(&d3), "{d3}");
            assert!(policy.delay(50).as_secs_f64() <= 10.0);
            assert!(policy.delay(i32::MAX).as_secs_f64() <= 10.0);
        }
    }

    #[test]
    fn rejects_bad_fields() {
        let jittery = RetryPolicy {
            jitter: 1.5,
            ..RetryPolicy::default()
        };
        assert!(jittery.validate().is_err());
        let slow = RetryPolicy {
            base: Duration::from_secs(7200),
            ..RetryPolicy::default()
        };
        assert!(slow.validate().is_err());
        assert!(RetryPolicy::default().validate().is_ok());
    }
}
