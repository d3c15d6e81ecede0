//! The `SESSION_REFERENCE_*` errors of spec §6.1, with DSH's messages where the spec gives them.

use host_api::abi::{ErrorCode, PluginError};

pub fn invalid_reference(message: impl Into<String>) -> PluginError {
    PluginError::new(ErrorCode::SessionReferenceInvalidReference, message)
}

pub fn self_reference(id: &str, index: usize) -> PluginError {
    PluginError::new(
        ErrorCode::SessionReferenceSelfReference,
        format!("reference {index} names session {id:?}, the citing session itself; a session cannot reference itself"),
    )
}

pub fn too_many(count: usize, max: usize) -> PluginError {
    PluginError::new(
        ErrorCode::SessionReferenceTooMany,
        format!("too many referenced sessions: {count} distinct sessions, at most {max} allowed (maxReferences)"),
    )
}

pub fn read_failed(cause: &PluginError) -> PluginError {
    PluginError::new(
        ErrorCode::SessionReferenceReadFailed,
        format!("failed to read referenced session: {}", cause.message),
    )
}

pub fn budget_exceeded(id: &str, detail: impl std::fmt::Display) -> PluginError {
    PluginError::new(
        ErrorCode::SessionReferenceBudgetExceeded,
        format!("referenced session snapshot cannot fit the configured byte budget: session {id:?}: {detail} (maxReferenceBytes)"),
    )
}

pub fn cancelled(what: &str) -> PluginError {
    PluginError::new(
        ErrorCode::SessionReferenceCancelled,
        format!("{what} was cancelled"),
    )
}

pub fn invalid_config(message: impl Into<String>) -> PluginError {
    PluginError::new(ErrorCode::SessionReferenceInvalidConfig, message)
}
