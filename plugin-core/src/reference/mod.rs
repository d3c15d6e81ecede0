//! Cross-session citations (spec §6): candidates to cite and the frozen, budgeted, escaped snapshot a
//! citation appends to the citing session.
//!
//! Plain Rust entry points over the exact reads, for the service layer to wire to the boundary:
//! [`list_candidates`] and [`prepare`], taking and returning the JSON records of
//! `host_api::abi::wire::reference`. Mentions themselves are parsed by the host with `host_api::mention`.
//!
//! Data flow of [`prepare`]: references → [`prepare::normalize`] → each source read once
//! (`source`) → projected (`project`) → retained within the byte budget and serialised as tagSafeJSON
//! (`retain`, `tag_safe`) → framed and wrapped in the context message (`frame`).
//!
//! Every failure is a `SESSION_REFERENCE_*` error (`errors`); nothing partial is ever returned.

mod candidates;
mod errors;
mod frame;
mod limits;
mod prepare;
mod project;
mod retain;
mod source;
mod tag_safe;

#[cfg(test)]
mod tests;

pub use candidates::{list_candidates, ExactTitles, TitleSource};
pub use frame::{PREFIX, SUFFIX};
pub(crate) use limits::de_count;
pub use limits::{
    check_config, Limits, DEFAULT_CANDIDATE_LIMIT, DEFAULT_MAX_REFERENCES,
    DEFAULT_MAX_REFERENCE_BYTES,
};
pub use prepare::{new_uuid, normalize, prepare, Normalized};
pub use retain::{truncate_with_notice, Stats};
