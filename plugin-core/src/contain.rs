//! Panic containment at the boundary.
//!
//! abi_stable's vtable shims abort the whole host process when a panic unwinds into them, so every method
//! body that the host can reach runs inside [`contain`], which turns a panic into a
//! `PLUGIN_PANICKED` error naming the call and the panic message.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, Once, Weak};

use abi_stable::std_types::{RResult, RStr};
use host_api::abi::{ErrorCode, HostContextBox, LogLevel, PluginError};

/// Runs `body`, converting its result to the ABI's `RResult` and any panic to `PLUGIN_PANICKED`.
pub fn contain<T>(
    call: &str,
    body: impl FnOnce() -> Result<T, PluginError>,
) -> RResult<T, PluginError> {
    // The plugin's state is behind locks that poison on panic or is rebuilt per call, so observing it
    // after a contained panic is safe; AssertUnwindSafe records that judgement.
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result.into(),
        Err(payload) => RResult::RErr(PluginError::new(
            ErrorCode::PluginPanicked,
            format!("the plugin panicked in {call}: {}", panic_message(&payload)),
        )),
    }
}

/// The text of a panic payload (`&str` or `String`), or a placeholder.
pub fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-text panic payload".to_string()
    }
}

/// Sends this plugin copy's panic reports (where and what) to the host's log instead of stderr.
///
/// Each loaded copy of the plugin has its own std, so this hook sees only panics raised in this copy's
/// code; [`contain`] still turns each into an error. The hook reports to the host of the most recently
/// built instance. Installed only by the exported constructor, never in unit tests, whose harness
/// relies on the default report.
pub fn route_panics_to(host: &Arc<HostContextBox>) {
    static HOST: Mutex<Option<Weak<HostContextBox>>> = Mutex::new(None);
    static INSTALL: Once = Once::new();
    *HOST.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::downgrade(host));
    INSTALL.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let host = HOST
                .try_lock()
                .ok()
                .and_then(|h| h.as_ref().and_then(Weak::upgrade));
            let Some(host) = host else {
                return default(info);
            };
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let what = if let Some(s) = info.payload().downcast_ref::<&str>() {
                (*s).to_string()
            } else if let Some(s) = info.payload().downcast_ref::<String>() {
                s.clone()
            } else {
                "non-text panic payload".to_string()
            };
            host.log(
                LogLevel::Error,
                RStr::from_str(&format!("plugin panicked{at}: {what} (contained)")),
            );
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_plugin_panicked_error() {
        let result: RResult<u32, PluginError> = contain("list_sessions", || panic!("boom {}", 7));
        let err = result.unwrap_err();
        assert_eq!(err.code, ErrorCode::PluginPanicked);
        assert!(
            err.message.contains("list_sessions") && err.message.contains("boom 7"),
            "{}",
            err.message
        );
    }

    #[test]
    fn values_and_errors_pass_through() {
        assert_eq!(contain("x", || Ok(3)).unwrap(), 3);
        let err = contain::<()>("x", || {
            Err(PluginError::new(ErrorCode::SessionQueryInvalidWindow, "w"))
        })
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionQueryInvalidWindow);
    }
}
