//! What a lenient read accepted beyond the spec's letter ([`ReadNotes`]), and the part of it a read
//! checkpoint stores ([`NotesState`]). Its own module because both the reader and the checkpoint carry
//! it, and neither should depend on the other's internals for it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::{LogError, LogErrorCode};

/// What a read accepted that the spec's letter would not, beyond the header diagnostics. Nothing in it
/// loses information; it is there so tools can report it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadNotes {
    /// Events read in a legacy shape and upgraded (spec §1.8).
    pub legacy_upgrades: u64,
    /// `request/header` events that break the config rule of spec §1.7 step 7 (lenient reads only).
    pub invalid_request_headers: u64,
    /// The first of those, located (path, line, seq), as a strict read would have failed.
    pub first_invalid_request_header: Option<LogError>,
}

/// The lenient-read notes a checkpoint carries ([`ReadNotes`] without the upgrade count, which the
/// legacy state holds, and with the first invalid `request/header` reduced to where and why).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NotesState {
    invalid_request_headers: u64,
    first_invalid_request_header: Option<NoteAt>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct NoteAt {
    line: Option<u64>,
    seq: Option<u64>,
    message: String,
}

impl NotesState {
    pub(crate) fn of(notes: &ReadNotes) -> Self {
        Self {
            invalid_request_headers: notes.invalid_request_headers,
            first_invalid_request_header: notes.first_invalid_request_header.as_ref().map(|e| {
                NoteAt {
                    line: e.line,
                    seq: e.seq,
                    message: e.message.clone(),
                }
            }),
        }
    }

    /// The notes again, the first invalid `request/header` located in the file at `path`.
    pub(crate) fn into_notes(self, path: &Path) -> ReadNotes {
        ReadNotes {
            legacy_upgrades: 0,
            invalid_request_headers: self.invalid_request_headers,
            first_invalid_request_header: self.first_invalid_request_header.map(|at| {
                let mut err =
                    LogError::new(LogErrorCode::InvalidRequestHeader, at.message).at_path(path);
                err.line = at.line;
                err.seq = at.seq;
                err
            }),
        }
    }
}
