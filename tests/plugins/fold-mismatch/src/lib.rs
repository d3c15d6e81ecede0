//! Test fixture: the real plugin claiming another log-format/fold version. It would label events
//! differently from the host's fold, so the host must refuse it.

plugin_core::export_plugin! { name: "dsh-session-search", version: "0.1.0-fold7", fold_version: 7 }
