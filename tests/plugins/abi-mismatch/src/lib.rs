//! Test fixture: the real plugin claiming another contract major (3.0). Its layout passes abi_stable's
//! check, so only the host's contract check can refuse it.

plugin_core::export_plugin! { name: "dsh-session-search", version: "3.0.0-next-major", contract: (3, 0) }
