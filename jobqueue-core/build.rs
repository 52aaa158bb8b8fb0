//! Rebuilds the crate when a migration is added or changed: the schema is
//! embedded from `../migrations` at compile time (see `migrate.rs`).

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
