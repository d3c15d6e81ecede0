//! Test fixture: the real plugin claiming another plugin ABI version. Its layout passes abi_stable's
//! check, so only the host's own version check can refuse it.

plugin_core::export_plugin! { name: "dsh-session-search", version: "0.1.0-abi99", abi_version: 99 }
