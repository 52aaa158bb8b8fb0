//! `#[derive(Job)]` as applications use it: each module derives for one
//! shape of type (or one set of attributes), and its test asserts what the
//! derive made. Compiling is the first half of each case; the misuses that
//! must not compile are trybuild's (tests/derive_ui.rs).

mod concurrency_key;
mod crate_path;
mod r#enum;
mod generic_struct;
mod limits;
mod named_struct_all_keys;
mod tuple_struct;
mod unit_struct;

/// Where crate_path.rs's application re-exports the core crate.
mod app {
    pub mod jobs {
        pub use jobqueue_core::*;
    }
}
