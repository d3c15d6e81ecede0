//! Test fixture: the real plugin with a panic injected into `list_sessions`, to show that a panic inside
//! a plugin call comes back as an error and the host keeps working, and one into its drop, to show that
//! closing such an instance does not abort the host.

plugin_core::export_plugin! {
    name: "dsh-session-search",
    version: "0.1.0-faulty",
    options: plugin_core::export::BuildOptions {
        fault: Some(plugin_core::service::Fault::PanicIn("list_sessions")),
        panic_on_drop: true,
        route_panics: true,
    },
}
