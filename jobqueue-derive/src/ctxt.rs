//! The error collector: every check reports here and parsing goes on, so a
//! user sees all their mistakes in one compile, each at its own token.

use std::fmt::Display;

use quote::ToTokens;

/// Errors found so far while reading one `#[derive(Job)]` input.
#[derive(Default)]
pub struct Ctxt {
    errors: Vec<syn::Error>,
}

impl Ctxt {
    /// An empty collector.
    pub fn new() -> Self {
        Ctxt::default()
    }

    /// Records an error spanning `tokens` (first to last token).
    pub fn error_spanned_by<T: ToTokens, M: Display>(&mut self, tokens: T, message: M) {
        self.errors
            .push(syn::Error::new_spanned(tokens.into_token_stream(), message));
    }

    /// `Ok` if nothing was recorded, else every error, combined in order.
    pub fn check(self) -> Result<(), syn::Error> {
        let mut errors = self.errors.into_iter();
        match errors.next() {
            None => Ok(()),
            Some(mut combined) => {
                for error in errors {
                    combined.combine(error);
                }
                Err(combined)
            }
        }
    }
}
