//! Frozen copies of earlier contract minors, one module each, never edited once written.
//!
//! abi_stable checks a library's layout against the layout the loading side expects and refuses a
//! library whose vtables have fewer entries than the expected types. A host of minor N therefore checks
//! a plugin of an older minor M against the frozen types of M (exact), and then uses it through today's
//! types: minor N only appended vtable entries after each `#[sabi(last_prefix_field)]`, which abi_stable
//! reaches through runtime accessibility checks, and the host never calls an entry minor M lacks.
//!
//! To release minor N+1: copy minor N's contract types here as `vN` (self-contained, abi_stable only),
//! add it to the loader's table of older minors, and freeze a fixture plugin against it.

// abi_stable's derives and `#[sabi_trait]` expand to items these lints flag.
#[allow(non_camel_case_types, non_local_definitions, non_upper_case_globals)]
pub mod v2_0;
#[allow(non_camel_case_types, non_local_definitions, non_upper_case_globals)]
pub mod v2_1;
