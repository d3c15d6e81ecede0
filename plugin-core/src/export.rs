//! Building a plugin instance behind the root module's `extern "C"` constructor.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use abi_stable::std_types::{RResult, RStr};
use host_api::abi::{ErrorCode, HostContextBox, PluginError, PluginInstanceBox};

use crate::config::Config;
use crate::contain::{panic_message, route_panics_to};
use crate::service::{Fault, Service};

/// Options a plugin library passes when it builds instances. The real plugin uses the default; test
/// fixture libraries inject faults here, so no config key can trigger one in a real build.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildOptions {
    pub fault: Option<Fault>,
    /// Panic while an instance is dropped (the host must survive it).
    pub panic_on_drop: bool,
    /// Report panics to the host's log instead of stderr (the exported constructor sets it).
    pub route_panics: bool,
}

/// Parses the config, opens the instance's resources and returns its two services. Never unwinds: the
/// caller is an `extern "C"` function.
pub fn build_instance(
    config: RStr<'_>,
    host: HostContextBox,
    options: BuildOptions,
) -> RResult<PluginInstanceBox, PluginError> {
    let built = catch_unwind(AssertUnwindSafe(|| {
        let config = Config::parse(config.as_str())?;
        let host = Arc::new(host);
        if options.route_panics {
            route_panics_to(&host);
        }
        Service::open_with(config, host, options.fault, options.panic_on_drop)
    }));
    match built {
        Ok(Ok(service)) => RResult::ROk(service.into_instance()),
        Ok(Err(e)) => RResult::RErr(e),
        Err(payload) => RResult::RErr(PluginError::new(
            ErrorCode::PluginPanicked,
            format!(
                "the plugin panicked while starting: {}",
                panic_message(&payload)
            ),
        )),
    }
}

/// Exports a plugin root module and the plugin's contract stamp from a cdylib crate. The crate needs
/// `abi_stable` and `plugin-core` as dependencies.
///
/// ```text
/// plugin_core::export_plugin! { name: "dsh-session-search", version: env!("CARGO_PKG_VERSION") }
/// ```
/// Test fixtures may also pass `contract: (major, minor)` or `fold_version: N` (to be refused) and
/// `options: BuildOptions { .. }`.
#[macro_export]
macro_rules! export_plugin {
    (
        name: $name:expr,
        version: $version:expr
        $(, contract: ($major:expr, $minor:expr))?
        $(, fold_version: $fold:expr)?
        $(, options: $options:expr)?
        $(,)?
    ) => {
        extern "C" fn __plugin_new(
            config: ::abi_stable::std_types::RStr<'_>,
            host: $crate::__reexport::HostContextBox,
        ) -> ::abi_stable::std_types::RResult<$crate::__reexport::PluginInstanceBox, $crate::__reexport::PluginError> {
            #[allow(unused_mut, unused_assignments)]
            let mut options = $crate::export::BuildOptions::default();
            $( options = $options; )?
            options.route_panics = true;
            $crate::export::build_instance(config, host, options)
        }

        const __PLUGIN_STAMP: $crate::__reexport::ContractStamp = {
            #[allow(unused_mut)]
            let mut stamp = $crate::__reexport::ContractStamp::current();
            $( stamp.major = $major; stamp.minor = $minor; )?
            $( stamp.fold_version = $fold; )?
            stamp
        };

        /// The contract this plugin was built against, readable before anything else of the library.
        #[no_mangle]
        pub static dsh_plugin_contract: $crate::__reexport::ContractStamp = __PLUGIN_STAMP;

        /// The plugin's root module, checked by the host before use.
        #[::abi_stable::export_root_module]
        pub fn get_root_module() -> $crate::__reexport::PluginRoot_Ref {
            use ::abi_stable::prefix_type::PrefixTypeTrait;
            $crate::__reexport::PluginRoot {
                contract: __PLUGIN_STAMP.contract(),
                fold_version: __PLUGIN_STAMP.fold_version,
                name: ::abi_stable::std_types::RStr::from_str($name),
                version: ::abi_stable::std_types::RStr::from_str($version),
                new: __plugin_new,
            }
            .leak_into_prefix()
        }
    };
}
