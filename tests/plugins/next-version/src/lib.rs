//! Test fixture: the real plugin reporting another version, to stand in for "a new build" in hot-reload
//! tests.

plugin_core::export_plugin! { name: "dsh-session-search", version: "0.2.0-next" }
