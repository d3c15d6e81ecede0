//! The plugin root module: what a plugin library exports and the host checks before using it.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    package_version_strings,
    sabi_types::VersionStrings,
    std_types::{RResult, RStr},
    StableAbi,
};

use super::error::PluginError;
use super::host::HostContextBox;
use super::query::SessionQueryBox;
use super::reference::SessionReferenceResolverBox;

/// Version of these contracts. Bumped on any change a plugin built against the old contracts could not
/// serve; the host refuses a plugin reporting another one, even if abi_stable's layout check passes.
pub const ABI_VERSION: u32 = 1;

/// The base name of the plugin library (`libdsh_session_search.so` on Linux).
pub const ROOT_BASE_NAME: &str = "dsh_session_search";

/// The two services of one plugin instance. Dropping it closes everything the instance opened.
#[repr(C)]
#[derive(StableAbi)]
pub struct PluginInstance {
    pub query: SessionQueryBox,
    pub resolver: SessionReferenceResolverBox,
}

/// The root module a plugin library exports with `#[export_root_module]`.
// abi_stable names the prefix reference type `PluginRoot_Ref`; the name is part of its derive contract.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginRoot_Ref)))]
#[sabi(missing_field(panic))]
pub struct PluginRoot {
    /// [`ABI_VERSION`] as the plugin was built.
    pub abi_version: u32,
    /// [`crate::FOLD_VERSION`] as the plugin was built.
    pub fold_version: u32,
    /// The plugin's name, e.g. `dsh-session-search`.
    pub name: RStr<'static>,
    /// The plugin's own version.
    pub version: RStr<'static>,
    /// Builds an instance from a JSON config and the host context. Must not panic (it is an
    /// `extern "C"` function: a panic would abort the host).
    #[sabi(last_prefix_field)]
    pub new: extern "C" fn(
        config: RStr<'_>,
        host: HostContextBox,
    ) -> RResult<PluginInstance, PluginError>,
}

impl RootModule for PluginRoot_Ref {
    declare_root_module_statics! {PluginRoot_Ref}
    const BASE_NAME: &'static str = ROOT_BASE_NAME;
    const NAME: &'static str = "dsh session plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
