//! DSH session log v0 (spec §1): the on-disk model and its codec.
//!
//! Data flow of a read, in module order: [`zstd_frames`] (zstd only: frame boundaries and decompression) →
//! [`scan`] (LF-terminated lines, packed rows expanded by [`packed`], seq contiguity, torn tails) →
//! [`legacy`] (old shapes upgraded) → [`validate`] (shapes, vocabulary) → [`repair`] (crash closers at the
//! end) → [`read::LogReader`] yields [`event::Event`]s one at a time, within the bounds of [`bounds`].
//! [`write::LogWriter`] is the reverse, refusing through [`append::AppendValidator`] any event a reader
//! would refuse, and [`layout`] maps ids and cwds to paths in a sessions root.

pub mod append;
pub mod bounds;
pub mod checkpoint;
pub mod error;
pub mod event;
pub mod event_ref;
pub mod header;
pub mod layout;
pub mod legacy;
mod line;
pub(crate) mod message;
pub mod notes;
pub mod packed;
pub mod payload;
pub mod read;
pub mod repair;
pub(crate) mod row;
pub(crate) mod scan;
pub mod validate;
pub mod write;
pub mod zstd_frames;

pub use append::{AppendValidator, CheckedBatch};
pub use bounds::MAX_LINE_BYTES;
pub use error::{clip_for_message, ErrorClass, LogError, LogErrorCode};
pub use event::Event;
pub use event_ref::EventRef;
pub use header::{HeaderDiagnostic, SessionHeader};
pub use payload::Payload;

/// The physical encoding of a log file (spec §1.2). Serialised as `"none"` / `"zstd"` (read checkpoints).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// `session.jsonl`: newline-delimited UTF-8.
    None,
    /// `session.jsonl.zstd`: concatenated zstd frames, one header frame then one frame per append batch.
    Zstd,
}

impl Compression {
    /// The fixed transcript file name inside a session directory.
    pub fn transcript_name(self) -> &'static str {
        match self {
            Self::None => "session.jsonl",
            Self::Zstd => "session.jsonl.zstd",
        }
    }
}
