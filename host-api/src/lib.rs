//! `host-api`: the contract the agent host and the session-search plugin meet through at run time.
//!
//! Both sides link this crate; they never link each other. It holds only what must stay stable:
//! - [`abi`]: the stable-ABI modules and vtables, the JSON wire records, error codes, the version
//!   policy and frozen copies of earlier minors;
//! - [`mention`]: the citation mention URIs both sides parse and format with one implementation.
//!
//! The DSH log codec and the fold live in `dsh-codec`, which changes more often; this crate uses it
//! only for the types the wire converts from (the session header and the surface label). Its package
//! version is the contract's identity for abi_stable's checks and moves only with a contract major.

pub mod abi;
pub mod mention;
