//! The error value that crosses the boundary, with an open set of codes.
//!
//! Codes are integers with named constants, not an exhaustive enum: a later contract minor adds codes, and
//! a peer built before it must still receive the error and show it. So every [`PluginError`] also carries
//! its code's literal name (`SESSION_QUERY_INVALID_QUERY`, …): a code this build does not know still
//! prints as its real name with its message, never as a bare number and never as a layout failure.

use abi_stable::{std_types::RString, StableAbi};
use serde::{Deserialize, Serialize};
use std::fmt;

/// An error code. The `SESSION_QUERY_*` and `SESSION_REFERENCE_*` codes are DSH's (spec §4.11, §6.1),
/// spelled exactly; the `PLUGIN_*` codes are this project's own. The numbers are part of the contract:
/// never reuse or renumber one; a new code takes the next free number in a new minor.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(pub u32);

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $num:literal => $lit:literal,)*) => {
        // The constants keep the names the closed enum had, so matching on them reads the same.
        #[allow(non_upper_case_globals)]
        impl ErrorCode {
            $($(#[$doc])* pub const $name: ErrorCode = ErrorCode($num);)*

            /// Every code this build knows, for tests and documentation.
            pub const ALL: &'static [ErrorCode] = &[$(Self::$name),*];

            /// The literal code string, when this build knows the code.
            pub fn known_name(self) -> Option<&'static str> {
                match self.0 {
                    $($num => Some($lit),)*
                    _ => None,
                }
            }

            /// The code with this literal name, when this build knows it.
            pub fn from_name(name: &str) -> Option<ErrorCode> {
                match name {
                    $($lit => Some(Self::$name),)*
                    _ => None,
                }
            }
        }
    };
}

codes! {
    SessionQueryAborted = 1 => "SESSION_QUERY_ABORTED",
    SessionQueryCorruptSession = 2 => "SESSION_QUERY_CORRUPT_SESSION",
    SessionQueryEventNotFound = 3 => "SESSION_QUERY_EVENT_NOT_FOUND",
    SessionQueryIndexFailed = 4 => "SESSION_QUERY_INDEX_FAILED",
    SessionQueryInvalidConfig = 5 => "SESSION_QUERY_INVALID_CONFIG",
    SessionQueryInvalidCursor = 6 => "SESSION_QUERY_INVALID_CURSOR",
    SessionQueryInvalidFilter = 7 => "SESSION_QUERY_INVALID_FILTER",
    SessionQueryInvalidLimit = 8 => "SESSION_QUERY_INVALID_LIMIT",
    SessionQueryInvalidQuery = 9 => "SESSION_QUERY_INVALID_QUERY",
    SessionQueryInvalidLineage = 10 => "SESSION_QUERY_INVALID_LINEAGE",
    SessionQueryInvalidSurface = 11 => "SESSION_QUERY_INVALID_SURFACE",
    SessionQueryInvalidWindow = 12 => "SESSION_QUERY_INVALID_WINDOW",
    SessionQueryPersistenceFailed = 13 => "SESSION_QUERY_PERSISTENCE_FAILED",
    SessionQuerySearchDisabled = 14 => "SESSION_QUERY_SEARCH_DISABLED",
    SessionQuerySessionNotFound = 15 => "SESSION_QUERY_SESSION_NOT_FOUND",
    SessionQueryStaleCursor = 16 => "SESSION_QUERY_STALE_CURSOR",
    SessionQuerySourceConflict = 17 => "SESSION_QUERY_SOURCE_CONFLICT",
    SessionReferenceInvalidConfig = 18 => "SESSION_REFERENCE_INVALID_CONFIG",
    SessionReferenceInvalidReference = 19 => "SESSION_REFERENCE_INVALID_REFERENCE",
    SessionReferenceSelfReference = 20 => "SESSION_REFERENCE_SELF_REFERENCE",
    SessionReferenceTooMany = 21 => "SESSION_REFERENCE_TOO_MANY",
    SessionReferenceReadFailed = 22 => "SESSION_REFERENCE_READ_FAILED",
    SessionReferenceBudgetExceeded = 23 => "SESSION_REFERENCE_BUDGET_EXCEEDED",
    SessionReferenceCancelled = 24 => "SESSION_REFERENCE_CANCELLED",
    /// A panic inside the plugin was contained and turned into this error.
    PluginPanicked = 100 => "PLUGIN_PANICKED",
    /// The host refused a library: not a plugin, another contract major, layout or fold version.
    PluginIncompatible = 101 => "PLUGIN_INCOMPATIBLE",
    /// The capability is not offered by this plugin build (for example a method of a later contract
    /// minor, asked of a plugin built against an earlier one).
    PluginNotImplemented = 102 => "PLUGIN_NOT_IMPLEMENTED",
    /// No plugin generation is loaded to serve the call.
    PluginUnavailable = 103 => "PLUGIN_UNAVAILABLE",
    /// The plugin's constructor rejected its config or failed to open its resources.
    PluginInitFailed = 104 => "PLUGIN_INIT_FAILED",
    /// A request or response document did not parse as the contract's JSON shape.
    PluginBadMessage = 105 => "PLUGIN_BAD_MESSAGE",
    /// The call's deadline passed before it finished.
    PluginDeadlineExceeded = 106 => "PLUGIN_DEADLINE_EXCEEDED",
    /// Contract 2.2: the serving plugin's contract minor predates the method; the host answers this
    /// itself instead of calling a vtable slot the plugin does not have.
    PluginMethodUnavailable = 107 => "PLUGIN_METHOD_UNAVAILABLE",
    /// Contract 2.2: the host cancelled the call (Ctrl-C, shutdown, a reload) and the method has no
    /// code of its own for that in the spec (exact reads, diagnostics).
    PluginCancelled = 108 => "PLUGIN_CANCELLED",
}

impl ErrorCode {
    /// The literal code string; a code this build does not know prints as `UNKNOWN_ERROR_CODE_<n>`.
    pub fn name(self) -> String {
        match self.known_name() {
            Some(name) => name.to_string(),
            None => format!("UNKNOWN_ERROR_CODE_{}", self.0),
        }
    }

    /// The literal code string of a known code (every code this build creates is known).
    pub fn as_str(self) -> &'static str {
        self.known_name().unwrap_or("UNKNOWN_ERROR_CODE")
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// An error returned across the boundary: a code, the code's literal name as the sender knew it, and a
/// message naming what and where. Its layout is fixed for the whole contract major.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct PluginError {
    pub code: ErrorCode,
    /// The sender's literal name for `code`, so a receiver that does not know the code still shows it.
    pub name: RString,
    pub message: RString,
}

impl PluginError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            name: RString::from(code.name()),
            message: RString::from(message.into()),
        }
    }

    /// The code's literal name: ours when we know the code, else the one the sender gave.
    pub fn code_name(&self) -> String {
        match self.code.known_name() {
            Some(name) => name.to_string(),
            None if !self.name.is_empty() => self.name.to_string(),
            None => self.code.name(),
        }
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code_name(), self.message)
    }
}

impl std::error::Error for PluginError {}

/// JSON form, `{"code":"SESSION_QUERY_…","message":"…"}`: the shape scripts and the wire records see.
impl Serialize for PluginError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            code: String,
            message: &'a str,
        }
        Json {
            code: self.code_name(),
            message: self.message.as_str(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for PluginError {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Json {
            code: String,
            message: String,
        }
        let json = Json::deserialize(d)?;
        Ok(match ErrorCode::from_name(&json.code) {
            Some(code) => PluginError::new(code, json.message),
            // A code newer than this build: keep its name; 0 is never a real code.
            None => PluginError {
                code: ErrorCode(0),
                name: json.code.into(),
                message: json.message.into(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_prefixed() {
        let mut names = std::collections::HashSet::new();
        let mut numbers = std::collections::HashSet::new();
        for &code in ErrorCode::ALL {
            let s = code.as_str();
            assert!(names.insert(s), "{s} twice");
            assert!(numbers.insert(code.0), "{} twice", code.0);
            assert_ne!(code.0, 0, "0 is kept for codes a peer does not know");
            assert!(
                s.starts_with("SESSION_QUERY_")
                    || s.starts_with("SESSION_REFERENCE_")
                    || s.starts_with("PLUGIN_"),
                "{s}"
            );
            assert_eq!(ErrorCode::from_name(s), Some(code));
        }
    }

    #[test]
    fn a_code_this_build_does_not_know_still_shows_its_name_and_message() {
        // As if sent by a plugin of a later minor that added code 250.
        let later = PluginError {
            code: ErrorCode(250),
            name: "SESSION_QUERY_SOMETHING_NEW".into(),
            message: "what happened".into(),
        };
        assert_eq!(
            later.to_string(),
            "SESSION_QUERY_SOMETHING_NEW: what happened"
        );
        let json = serde_json::to_string(&later).unwrap();
        assert_eq!(
            json,
            r#"{"code":"SESSION_QUERY_SOMETHING_NEW","message":"what happened"}"#
        );
        let back: PluginError = serde_json::from_str(&json).unwrap();
        assert_eq!(back.code_name(), "SESSION_QUERY_SOMETHING_NEW");
        assert_eq!(back.message.as_str(), "what happened");

        let nameless = PluginError {
            code: ErrorCode(251),
            name: RString::new(),
            message: "m".into(),
        };
        assert_eq!(nameless.to_string(), "UNKNOWN_ERROR_CODE_251: m");
    }
}
