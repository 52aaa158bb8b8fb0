//! A request the dashboard turns down: its status and the reason shown,
//! from the routes and the pages alike.

use jobqueue_core::Error;

/// A request the dashboard turns down, with the reason.
pub(crate) struct Refusal {
    /// The HTTP status of the answer.
    pub(crate) status: u16,
    /// What was wrong, shown on the page.
    pub(crate) message: String,
}

impl Refusal {
    /// A refusal with `status` and `message`.
    pub(crate) fn new(status: u16, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
        }
    }

    /// The page's title for the status.
    pub(crate) fn title(&self) -> &'static str {
        match self.status {
            400 => "Not understood",
            403 => "Refused",
            404 => "Not found",
            409 => "Not possible now",
            _ => "Error",
        }
    }
}

impl From<Error> for Refusal {
    fn from(error: Error) -> Self {
        let status = match &error {
            Error::NotFound(_) | Error::UnknownQueue { .. } | Error::UnknownSchedule { .. } => 404,
            Error::InvalidOption { .. } | Error::UnknownJobType { .. } => 400,
            Error::WrongStatus { .. } | Error::UniqueConflict { .. } => 409,
            _ => 500,
        };
        if status == 500 {
            log::warn!("dashboard: {error}");
        }
        Refusal::new(status, error.to_string())
    }
}
