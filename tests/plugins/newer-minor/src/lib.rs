//! Test fixture: the real plugin claiming contract 2.99, a minor newer than the host's. The host cannot
//! know what such a plugin expects of it, so it must refuse it with the reason.

plugin_core::export_plugin! { name: "dsh-session-search", version: "2.99.0-newer-minor", contract: (2, 99) }
