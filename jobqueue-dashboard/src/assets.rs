//! The stylesheet and the script, compiled into the binary: nothing is
//! fetched from elsewhere at run time.

/// The stylesheet.
pub(crate) const STYLE: &str = include_str!("../assets/style.css");

/// The script: refreshes pages that ask for it.
pub(crate) const SCRIPT: &str = include_str!("../assets/app.js");
