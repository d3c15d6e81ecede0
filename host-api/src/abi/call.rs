//! The per-call context every plugin method receives: cancellation, an optional deadline, and the
//! calling session.
//!
//! It is a trait object implemented by the host, so its vtable is a prefix type: a later minor appends
//! methods, and a plugin built before them simply never calls them. The host keeps ownership; the plugin
//! borrows it for the duration of the call and must not keep it.

// `#[sabi_trait]` expands to impls inside a const block, which this lint flags; the code is abi_stable's.
#![allow(non_local_definitions)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use abi_stable::{
    sabi_trait,
    sabi_trait::TD_Opaque,
    sabi_types::RRef,
    std_types::{RNone, ROption, RSome, RString},
};

use super::error::{ErrorCode, PluginError};

/// What the plugin may ask about the call it is serving. Implemented by the host.
#[sabi_trait]
pub trait CallContext: Sync {
    /// Whether the host has cancelled this call; a plugin checks it between units of work.
    fn is_cancelled(&self) -> bool;

    /// When the host stops waiting, in milliseconds since the Unix epoch; `None` for no deadline.
    fn deadline_unix_ms(&self) -> ROption<i64>;

    /// The session on whose behalf the call is made (for authorization: a session may, say, only cite
    /// sessions of its own cwd); `None` when a person asked directly.
    #[sabi(last_prefix_field)]
    fn calling_session(&self) -> ROption<RString>;
}

/// The borrowed call context a plugin method receives.
pub type CallRef<'a> = CallContext_TO<'a, RRef<'a, ()>>;

/// A ready-made [`CallContext`] for hosts and tests: a shared cancellation flag, a deadline, a caller.
#[derive(Debug, Clone, Default)]
pub struct Call {
    cancelled: Arc<AtomicBool>,
    deadline_unix_ms: Option<i64>,
    calling_session: Option<String>,
}

impl Call {
    /// A call nobody cancels, without deadline or calling session.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same call with a deadline `ms` milliseconds from now.
    pub fn with_timeout_ms(mut self, ms: u64) -> Self {
        let now = now_unix_ms();
        self.deadline_unix_ms = Some(now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX)));
        self
    }

    /// The same call made on behalf of `session`.
    pub fn on_behalf_of(mut self, session: impl Into<String>) -> Self {
        self.calling_session = Some(session.into());
        self
    }

    /// The flag that cancels this call (and every clone of it) when set.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.cancelled.clone()
    }

    /// Cancels this call and every clone of it.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// The same call, cancelled by `flag` too: hosts give every call of a command one shared flag, so
    /// a Ctrl-C cancels whichever call is in flight.
    pub fn with_cancel_flag(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancelled = flag;
        self
    }

    /// The same call with an absolute deadline (milliseconds since the Unix epoch), or none.
    pub fn with_deadline_unix_ms(mut self, deadline: Option<i64>) -> Self {
        self.deadline_unix_ms = deadline;
        self
    }

    /// The context to pass to a plugin method.
    pub fn as_ref(&self) -> CallRef<'_> {
        CallContext_TO::from_ptr(RRef::new(self), TD_Opaque)
    }

    /// This call as the plugin sees it while `stop` also cancels it: the host's own reason to end
    /// every call of a plugin generation (a reload, shutdown), beside whatever cancels this call.
    pub fn within<'a>(&'a self, stop: &'a AtomicBool) -> Within<'a> {
        Within { call: self, stop }
    }
}

/// A [`Call`] that a host-wide flag cancels as well ([`Call::within`]).
pub struct Within<'a> {
    call: &'a Call,
    stop: &'a AtomicBool,
}

impl Within<'_> {
    /// The context to pass to a plugin method.
    pub fn as_ref(&self) -> CallRef<'_> {
        CallContext_TO::from_ptr(RRef::new(self), TD_Opaque)
    }
}

impl CallContext for Within<'_> {
    fn is_cancelled(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.call.is_cancelled()
    }

    fn deadline_unix_ms(&self) -> ROption<i64> {
        self.call.deadline_unix_ms()
    }

    fn calling_session(&self) -> ROption<RString> {
        self.call.calling_session()
    }
}

impl CallContext for Call {
    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    fn deadline_unix_ms(&self) -> ROption<i64> {
        self.deadline_unix_ms.into()
    }

    fn calling_session(&self) -> ROption<RString> {
        match &self.calling_session {
            Some(s) => RSome(s.as_str().into()),
            None => RNone,
        }
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Why a call should stop now, if it should: cancelled (with the code the caller's service uses for it)
/// or past its deadline.
pub fn check_call(
    call: &CallRef<'_>,
    cancelled_code: ErrorCode,
    what: &str,
) -> Result<(), PluginError> {
    if call.is_cancelled() {
        return Err(PluginError::new(
            cancelled_code,
            format!("{what} was cancelled"),
        ));
    }
    if let RSome(deadline) = call.deadline_unix_ms() {
        if now_unix_ms() > deadline {
            return Err(PluginError::new(
                ErrorCode::PluginDeadlineExceeded,
                format!("{what} passed its deadline"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_reports_cancellation_deadline_and_caller_through_the_vtable() {
        let call = Call::new().on_behalf_of("s1");
        let r = call.as_ref();
        assert!(!r.is_cancelled());
        assert_eq!(r.deadline_unix_ms(), RNone);
        assert_eq!(r.calling_session(), RSome(RString::from("s1")));
        assert!(check_call(&r, ErrorCode::SessionQueryAborted, "x").is_ok());
        call.clone().cancel();
        let err = check_call(&call.as_ref(), ErrorCode::SessionQueryAborted, "search").unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionQueryAborted);
    }

    #[test]
    fn a_passed_deadline_stops_the_call() {
        let mut call = Call::new();
        call.deadline_unix_ms = Some(now_unix_ms() - 1);
        let err = check_call(&call.as_ref(), ErrorCode::SessionQueryAborted, "search").unwrap_err();
        assert_eq!(err.code, ErrorCode::PluginDeadlineExceeded);
        assert!(check_call(
            &Call::new().with_timeout_ms(60_000).as_ref(),
            ErrorCode::SessionQueryAborted,
            "search"
        )
        .is_ok());
    }

    #[test]
    fn a_host_stop_flag_cancels_a_call_and_keeps_its_deadline_and_caller() {
        let stop = AtomicBool::new(false);
        let call = Call::new().with_timeout_ms(60_000).on_behalf_of("s2");
        let within = call.within(&stop);
        assert!(!within.as_ref().is_cancelled());
        assert_eq!(
            within.as_ref().deadline_unix_ms(),
            call.as_ref().deadline_unix_ms()
        );
        assert_eq!(
            within.as_ref().calling_session(),
            RSome(RString::from("s2"))
        );
        stop.store(true, Ordering::SeqCst);
        assert!(within.as_ref().is_cancelled());
        assert!(
            !call.as_ref().is_cancelled(),
            "the call itself was not cancelled"
        );

        let shared = Arc::new(AtomicBool::new(false));
        let a = Call::new().with_cancel_flag(shared.clone());
        shared.store(true, Ordering::SeqCst);
        assert!(a.as_ref().is_cancelled());
    }
}
