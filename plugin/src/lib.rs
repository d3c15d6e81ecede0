//! The session-search plugin as a dynamic library (`libdsh_session_search.so`).
//!
//! Everything lives in `plugin-core`; this crate only exports its root module under the plugin's name and
//! version, so a host can load it from its plugin folder and hot-reload it.

plugin_core::export_plugin! { name: "dsh-session-search", version: env!("CARGO_PKG_VERSION") }

// Everything the plugin allocates, with mimalloc (see `dsh-alloc`). The host frees none of it: values
// crossing the ABI carry their own deallocator.
dsh_alloc::install!();
