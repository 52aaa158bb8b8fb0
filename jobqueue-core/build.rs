//! Rebuilds the crate when a migration is added or changed: the schema is
//! embedded from `migrations/` (in this crate's folder, so that it is in the
//! crate's package) at compile time (see `migrate.rs`).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
