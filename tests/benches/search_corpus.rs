//! Placeholder while the harness is written.
fn main() {}
