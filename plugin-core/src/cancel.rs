//! Cancellation as the plugin's code sees it: a cheap, copyable "should I stop?" handle.
//!
//! A service method turns the host's per-call context into one of these once, at its entry, so the
//! corpus and the reads below it never see ABI types and tests can build one from a closure.

use host_api::abi::{CallRef, ErrorCode, PluginError};

/// Whether the current call should stop. [`Cancel::NEVER`] is for work nobody can cancel.
#[derive(Clone, Copy)]
pub struct Cancel<'a>(Option<&'a dyn Fn() -> bool>);

impl<'a> Cancel<'a> {
    /// A call nobody cancels.
    pub const NEVER: Cancel<'static> = Cancel(None);

    /// Cancelled whenever `f` says so.
    pub fn new(f: &'a dyn Fn() -> bool) -> Self {
        Self(Some(f))
    }

    pub fn is_cancelled(self) -> bool {
        self.0.is_some_and(|f| f())
    }

    /// `Err(code)` when the call was cancelled; `what` names the work in the message.
    pub fn check_with(self, code: ErrorCode, what: &str) -> Result<(), PluginError> {
        if self.is_cancelled() {
            return Err(PluginError::new(
                code,
                format!("{what} aborted: the call was cancelled"),
            ));
        }
        Ok(())
    }
}

/// The stop condition of a host call: cancelled by the host, or past its deadline.
pub fn call_stopped(call: &CallRef<'_>) -> bool {
    call.is_cancelled()
        || call
            .deadline_unix_ms()
            .into_option()
            .is_some_and(|deadline| host_api::abi::call::now_unix_ms() > deadline)
}

impl std::fmt::Debug for Cancel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Cancel(..)"
        } else {
            "Cancel::NEVER"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn never_is_never_cancelled_and_a_closure_decides_otherwise() {
        assert!(!Cancel::NEVER.is_cancelled());
        let flag = AtomicBool::new(false);
        let f = || flag.load(Ordering::SeqCst);
        let cancel = Cancel::new(&f);
        assert!(cancel
            .check_with(ErrorCode::SessionQueryAborted, "x")
            .is_ok());
        flag.store(true, Ordering::SeqCst);
        let err = cancel
            .check_with(ErrorCode::SessionQueryAborted, "listing")
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionQueryAborted);
        assert!(err.message.contains("listing"));
    }
}
