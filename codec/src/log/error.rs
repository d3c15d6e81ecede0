//! The one error type of the log codec: a code, the class DSH gives that failure, and where it happened.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

/// The most characters of one quoted value (an id, a type, a path component) an error message carries.
pub const MESSAGE_CLIP_CHARS: usize = 100;

/// `text` cut to [`MESSAGE_CLIP_CHARS`] characters, with `…` and the full length appended when cut, for
/// quoting untrusted values in messages: a megabyte-long id must not make a megabyte-long error line.
pub fn clip_for_message(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(MESSAGE_CLIP_CHARS) {
        None => Cow::Borrowed(text),
        Some((cut, _)) => Cow::Owned(format!(
            "{}…({} bytes in all)",
            text.get(..cut).unwrap_or_default(),
            text.len()
        )),
    }
}

/// How DSH classifies a failure (spec §1.7). The class decides the query error code a consumer reports:
/// only [`ErrorClass::Corrupt`] becomes `SESSION_QUERY_CORRUPT_SESSION` on exact reads; the others become
/// `SESSION_QUERY_PERSISTENCE_FAILED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The bytes on disk could not be read as a log: header, scanner, zstd framing, layout, I/O.
    Physical,
    /// The log reads, but its content breaks a logical rule (shapes, envelope, legacy upgrade, fold).
    Corrupt,
    /// A refusal: written by another format version, or holding an event type this build does not know.
    Unsupported,
}

/// What went wrong, as a stable code. `as_str` is what tools print and scripts match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LogErrorCode {
    /// Reading or writing the file failed at the OS level.
    Io,
    /// No complete header record (empty file, no LF, incomplete first zstd frame).
    MissingHeader,
    /// The header record is not JSON.
    HeaderNotJson,
    /// The header is JSON but not a session header (spec §1.3 step 3 / step 5).
    InvalidHeader,
    /// The header carries the retired `sandboxMode`/`approvalPolicy` keys.
    RetiredHeaderFields,
    /// The header's `version` is newer than 0.
    NewerFormat,
    /// The header's `version` is older than 0.
    OlderFormat,
    /// A line that does not parse as JSON before later committed work (a `turn/end`).
    UnparsableLine,
    /// A seq gap before later committed work (a `turn/end`).
    SeqGap,
    /// A zstd frame with a magic number other than the zstd frame magic.
    ZstdBadMagic,
    /// A zstd frame whose header or block structure is invalid.
    ZstdBadFrame,
    /// A complete zstd frame that fails to decompress or whose checksum does not match.
    ZstdChecksum,
    /// The first zstd frame holds something other than exactly one header line.
    ZstdHeaderFrame,
    /// A complete zstd frame holds an incomplete or unacceptable JSONL record.
    ZstdTornRecord,
    /// The final zstd frame is cut short (a crash mid-append). Only ever a torn tail, never an error.
    ZstdTornFrame,
    /// The final line has no LF (a crash mid-append). Only ever a torn tail, never an error.
    TornLine,
    /// An event envelope with missing, extra or mistyped keys (spec §1.4).
    InvalidEnvelope,
    /// A packed chunk row that breaks the row rules (spec §1.6); surfaces as an unparsable line.
    InvalidPackedRow,
    /// `request/header-delta`, `mode/set`, or a `request/header` with reason `fallback`.
    ObsoleteVocabulary,
    /// A legacy shape (spec §1.8) that cannot be upgraded.
    MalformedLegacy,
    /// A message event whose message shape is invalid (spec §1.7 step 4).
    InvalidMessage,
    /// A `request/header` whose config is invalid (spec §1.7 step 7).
    InvalidRequestHeader,
    /// An event type outside the known set without `ignorable: true`.
    UnknownEventType,
    /// The header id differs from the id the log was looked up by.
    IdMismatch,
    /// The surface fold rejected the log (spec §2).
    InvalidSurface,
    /// The sessions root breaks a layout rule (flat artifacts, mixed encodings, identity, duplicates).
    Layout,
    /// A writer was asked for something the format cannot hold (bad seq, empty id, an existing log).
    InvalidWrite,
    /// The path names something other than a regular file (a FIFO, a device, a directory), which a reader
    /// could block on or read forever.
    NotRegularFile,
    /// A line (the header included; for zstd logs, a line of the decompressed text) longer than the
    /// reader's line cap ([`super::read::MAX_LINE_BYTES`] unless the options lower it).
    LineTooLong,
    /// Another writer holds or has extended the log this writer appends to; nothing was written.
    ConcurrentWrite,
}

impl LogErrorCode {
    /// The stable code string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Io => "LOG_IO",
            Self::MissingHeader => "LOG_MISSING_HEADER",
            Self::HeaderNotJson => "LOG_HEADER_NOT_JSON",
            Self::InvalidHeader => "LOG_INVALID_HEADER",
            Self::RetiredHeaderFields => "LOG_RETIRED_HEADER_FIELDS",
            Self::NewerFormat => "LOG_NEWER_FORMAT",
            Self::OlderFormat => "LOG_OLDER_FORMAT",
            Self::UnparsableLine => "LOG_UNPARSABLE_LINE",
            Self::SeqGap => "LOG_SEQ_GAP",
            Self::ZstdBadMagic => "LOG_ZSTD_BAD_MAGIC",
            Self::ZstdBadFrame => "LOG_ZSTD_BAD_FRAME",
            Self::ZstdChecksum => "LOG_ZSTD_CHECKSUM",
            Self::ZstdHeaderFrame => "LOG_ZSTD_HEADER_FRAME",
            Self::ZstdTornRecord => "LOG_ZSTD_TORN_RECORD",
            Self::ZstdTornFrame => "LOG_ZSTD_TORN_FRAME",
            Self::TornLine => "LOG_TORN_LINE",
            Self::InvalidEnvelope => "LOG_INVALID_ENVELOPE",
            Self::InvalidPackedRow => "LOG_INVALID_PACKED_ROW",
            Self::ObsoleteVocabulary => "LOG_OBSOLETE_VOCABULARY",
            Self::MalformedLegacy => "LOG_MALFORMED_LEGACY",
            Self::InvalidMessage => "LOG_INVALID_MESSAGE",
            Self::InvalidRequestHeader => "LOG_INVALID_REQUEST_HEADER",
            Self::UnknownEventType => "LOG_UNKNOWN_EVENT_TYPE",
            Self::IdMismatch => "LOG_ID_MISMATCH",
            Self::InvalidSurface => "LOG_INVALID_SURFACE",
            Self::Layout => "LOG_LAYOUT",
            Self::InvalidWrite => "LOG_INVALID_WRITE",
            Self::NotRegularFile => "LOG_NOT_REGULAR_FILE",
            Self::LineTooLong => "LOG_LINE_TOO_LONG",
            Self::ConcurrentWrite => "LOG_CONCURRENT_WRITE",
        }
    }

    /// The DSH error class of this code.
    pub fn class(self) -> ErrorClass {
        match self {
            Self::NewerFormat | Self::OlderFormat | Self::UnknownEventType => {
                ErrorClass::Unsupported
            }
            Self::InvalidEnvelope
            | Self::ObsoleteVocabulary
            | Self::MalformedLegacy
            | Self::InvalidMessage
            | Self::InvalidRequestHeader
            | Self::IdMismatch
            | Self::InvalidSurface => ErrorClass::Corrupt,
            _ => ErrorClass::Physical,
        }
    }
}

impl fmt::Display for LogErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure reading or writing a session log, naming the file, the line (1-based, the header is line 1;
/// for zstd logs, the line of the decompressed text) and the seq where they are known, and the rule broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogError {
    pub code: LogErrorCode,
    pub path: Option<PathBuf>,
    pub line: Option<u64>,
    pub seq: Option<u64>,
    pub message: String,
}

impl LogError {
    pub fn new(code: LogErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            path: None,
            line: None,
            seq: None,
            message: message.into(),
        }
    }

    pub fn io(path: &Path, err: &std::io::Error) -> Self {
        Self::new(LogErrorCode::Io, format!("{err}")).at_path(path)
    }

    pub fn at_path(mut self, path: &Path) -> Self {
        if self.path.is_none() {
            self.path = Some(path.to_path_buf());
        }
        self
    }

    pub fn at_line(mut self, line: u64) -> Self {
        self.line = Some(line);
        self
    }

    pub fn at_seq(mut self, seq: u64) -> Self {
        self.seq = Some(seq);
        self
    }

    pub fn class(&self) -> ErrorClass {
        self.code.class()
    }
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{}", path.display())?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
            f.write_str(": ")?;
        } else if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(seq) = self.seq {
            write!(f, "seq {seq}: ")?;
        }
        write!(f, "{} [{}]", self.message, self.code)
    }
}

impl std::error::Error for LogError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_quoted_whole_and_long_ones_clipped_on_a_char_boundary() {
        assert_eq!(clip_for_message("abc"), "abc");
        let exact = "x".repeat(MESSAGE_CLIP_CHARS);
        assert_eq!(clip_for_message(&exact), exact.as_str());
        let long = "é".repeat(300);
        let clipped = clip_for_message(&long);
        assert!(clipped.starts_with(&"é".repeat(MESSAGE_CLIP_CHARS)));
        assert!(clipped.ends_with("…(600 bytes in all)"), "{clipped}");
        assert_eq!(
            clipped.chars().filter(|&c| c == 'é').count(),
            MESSAGE_CLIP_CHARS
        );
    }
}
