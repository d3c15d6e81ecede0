//! Helpers shared by the integration tests of `host-api` (and, by path, its benchmarks).

pub mod bombs;
