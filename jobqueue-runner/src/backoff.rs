//! Waiting: the reconnect backoff, and sleeps that end early when the
//! runner stops.

use std::time::Duration;

/// Exponential backoff for reconnect loops: 50 ms doubling to 2 s, jittered.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(2);

    pub(crate) fn new() -> Self {
        Backoff { next: Self::FIRST }
    }

    pub(crate) fn reset(&mut self) {
        self.next = Self::FIRST;
    }

    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next.mul_f64(0.75 + fastrand::f64() * 0.5);
        self.next = (self.next * 2).min(Self::MAX);
        delay
    }
}

/// Sleeps for `timeout` unless `stop` is closed first; true if it was.
/// (A stop channel is closed by dropping its sender: a broadcast to every
/// thread holding a receiver.)
pub(crate) fn stopped_within(stop: &crossbeam_channel::Receiver<()>, timeout: Duration) -> bool {
    matches!(
        stop.recv_timeout(timeout),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected) | Ok(())
    )
}

/// Whether `stop` is closed, without waiting.
pub(crate) fn is_stopped(stop: &crossbeam_channel::Receiver<()>) -> bool {
    matches!(
        stop.try_recv(),
        Err(crossbeam_channel::TryRecvError::Disconnected) | Ok(())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_with_jitter_and_resets() {
        let mut backoff = Backoff::new();
        let delays: Vec<Duration> = (0..10).map(|_| backoff.next_delay()).collect();
        let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
        assert!((37.5..=62.5).contains(&ms(&delays[0])), "{delays:?}");
        assert!((75.0..=125.0).contains(&ms(&delays[1])), "{delays:?}");
        for delay in &delays {
            assert!(ms(delay) <= 2500.0, "{delays:?}");
        }
        assert!(ms(&delays[9]) >= 1500.0, "capped at 2 s ± 25 %: {delays:?}");
        backoff.reset();
        assert!(ms(&backoff.next_delay()) <= 62.5);
    }
}
