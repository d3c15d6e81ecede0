//! The contract crate of the frozen 2.1 fixture: the very file the host keeps as its frozen copy of
//! contract 2.1, compiled here as a plugin built against 2.1 would have compiled it.

// abi_stable's derives and `#[sabi_trait]` expand to items these lints flag.
#![allow(non_camel_case_types, non_local_definitions, non_upper_case_globals)]

#[path = "../../../../../host-api/src/abi/frozen/v2_1.rs"]
mod contract;

pub use contract::*;
