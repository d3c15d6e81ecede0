//! The one closed set of error codes that crosses the boundary, and the error value carrying it.

use abi_stable::{std_types::RString, StableAbi};
use std::fmt;

/// Every error a plugin call can return. The `SESSION_QUERY_*` and `SESSION_REFERENCE_*` codes are DSH's
/// (spec §4.11, §6.1), spelled exactly; the `PLUGIN_*` codes are this project's own.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    SessionQueryAborted,
    SessionQueryCorruptSession,
    SessionQueryEventNotFound,
    SessionQueryIndexFailed,
    SessionQueryInvalidConfig,
    SessionQueryInvalidCursor,
    SessionQueryInvalidFilter,
    SessionQueryInvalidLimit,
    SessionQueryInvalidQuery,
    SessionQueryInvalidLineage,
    SessionQueryInvalidSurface,
    SessionQueryInvalidWindow,
    SessionQueryPersistenceFailed,
    SessionQuerySearchDisabled,
    SessionQuerySessionNotFound,
    SessionQueryStaleCursor,
    SessionQuerySourceConflict,
    SessionReferenceInvalidConfig,
    SessionReferenceInvalidReference,
    SessionReferenceSelfReference,
    SessionReferenceTooMany,
    SessionReferenceReadFailed,
    SessionReferenceBudgetExceeded,
    SessionReferenceCancelled,
    /// A panic inside the plugin was contained and turned into this error.
    PluginPanicked,
    /// The host refused a library: not a plugin, another ABI, layout or fold version.
    PluginIncompatible,
    /// The capability exists in the contract but this plugin build does not implement it yet.
    PluginNotImplemented,
    /// No plugin generation is loaded to serve the call.
    PluginUnavailable,
    /// The plugin's constructor rejected its config or failed to open its resources.
    PluginInitFailed,
}

impl ErrorCode {
    /// Every code, for tests and documentation.
    pub const ALL: [ErrorCode; 29] = [
        Self::SessionQueryAborted,
        Self::SessionQueryCorruptSession,
        Self::SessionQueryEventNotFound,
        Self::SessionQueryIndexFailed,
        Self::SessionQueryInvalidConfig,
        Self::SessionQueryInvalidCursor,
        Self::SessionQueryInvalidFilter,
        Self::SessionQueryInvalidLimit,
        Self::SessionQueryInvalidQuery,
        Self::SessionQueryInvalidLineage,
        Self::SessionQueryInvalidSurface,
        Self::SessionQueryInvalidWindow,
        Self::SessionQueryPersistenceFailed,
        Self::SessionQuerySearchDisabled,
        Self::SessionQuerySessionNotFound,
        Self::SessionQueryStaleCursor,
        Self::SessionQuerySourceConflict,
        Self::SessionReferenceInvalidConfig,
        Self::SessionReferenceInvalidReference,
        Self::SessionReferenceSelfReference,
        Self::SessionReferenceTooMany,
        Self::SessionReferenceReadFailed,
        Self::SessionReferenceBudgetExceeded,
        Self::SessionReferenceCancelled,
        Self::PluginPanicked,
        Self::PluginIncompatible,
        Self::PluginNotImplemented,
        Self::PluginUnavailable,
        Self::PluginInitFailed,
    ];

    /// The literal code string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionQueryAborted => "SESSION_QUERY_ABORTED",
            Self::SessionQueryCorruptSession => "SESSION_QUERY_CORRUPT_SESSION",
            Self::SessionQueryEventNotFound => "SESSION_QUERY_EVENT_NOT_FOUND",
            Self::SessionQueryIndexFailed => "SESSION_QUERY_INDEX_FAILED",
            Self::SessionQueryInvalidConfig => "SESSION_QUERY_INVALID_CONFIG",
            Self::SessionQueryInvalidCursor => "SESSION_QUERY_INVALID_CURSOR",
            Self::SessionQueryInvalidFilter => "SESSION_QUERY_INVALID_FILTER",
            Self::SessionQueryInvalidLimit => "SESSION_QUERY_INVALID_LIMIT",
            Self::SessionQueryInvalidQuery => "SESSION_QUERY_INVALID_QUERY",
            Self::SessionQueryInvalidLineage => "SESSION_QUERY_INVALID_LINEAGE",
            Self::SessionQueryInvalidSurface => "SESSION_QUERY_INVALID_SURFACE",
            Self::SessionQueryInvalidWindow => "SESSION_QUERY_INVALID_WINDOW",
            Self::SessionQueryPersistenceFailed => "SESSION_QUERY_PERSISTENCE_FAILED",
            Self::SessionQuerySearchDisabled => "SESSION_QUERY_SEARCH_DISABLED",
            Self::SessionQuerySessionNotFound => "SESSION_QUERY_SESSION_NOT_FOUND",
            Self::SessionQueryStaleCursor => "SESSION_QUERY_STALE_CURSOR",
            Self::SessionQuerySourceConflict => "SESSION_QUERY_SOURCE_CONFLICT",
            Self::SessionReferenceInvalidConfig => "SESSION_REFERENCE_INVALID_CONFIG",
            Self::SessionReferenceInvalidReference => "SESSION_REFERENCE_INVALID_REFERENCE",
            Self::SessionReferenceSelfReference => "SESSION_REFERENCE_SELF_REFERENCE",
            Self::SessionReferenceTooMany => "SESSION_REFERENCE_TOO_MANY",
            Self::SessionReferenceReadFailed => "SESSION_REFERENCE_READ_FAILED",
            Self::SessionReferenceBudgetExceeded => "SESSION_REFERENCE_BUDGET_EXCEEDED",
            Self::SessionReferenceCancelled => "SESSION_REFERENCE_CANCELLED",
            Self::PluginPanicked => "PLUGIN_PANICKED",
            Self::PluginIncompatible => "PLUGIN_INCOMPATIBLE",
            Self::PluginNotImplemented => "PLUGIN_NOT_IMPLEMENTED",
            Self::PluginUnavailable => "PLUGIN_UNAVAILABLE",
            Self::PluginInitFailed => "PLUGIN_INIT_FAILED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error returned across the boundary: a code and a message naming what and where.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct PluginError {
    pub code: ErrorCode,
    pub message: RString,
}

impl PluginError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: RString::from(message.into()),
        }
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for PluginError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_prefixed() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "{s} twice");
            assert!(
                s.starts_with("SESSION_QUERY_")
                    || s.starts_with("SESSION_REFERENCE_")
                    || s.starts_with("PLUGIN_"),
                "{s}"
            );
        }
    }
}
