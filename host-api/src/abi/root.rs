//! The plugin root module and the plugin instance: what a plugin library exports and the host checks
//! before using it.

// `#[sabi_trait]` expands to impls inside a const block, which this lint flags; the code is abi_stable's.
#![allow(non_local_definitions)]

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    package_version_strings, sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, RResult, RStr},
    StableAbi,
};

use super::error::PluginError;
use super::host::HostContextBox;
use super::query::SessionQueryBox;
use super::reference::SessionReferenceResolverBox;
use super::version::ContractVersion;

/// The base name of the plugin library (`libdsh_session_search.so` on Linux).
pub const ROOT_BASE_NAME: &str = "dsh_session_search";

/// One plugin instance: its services. A trait object, so its vtable is a prefix type and a later minor
/// can append a third service. Dropping the instance and every service box taken from it closes
/// everything the instance opened.
#[sabi_trait]
pub trait PluginInstance: Send + Sync + 'static {
    /// `ctx.sessionQuery`.
    fn session_query(&self) -> SessionQueryBox;

    /// `ctx.sessionReferenceResolver`.
    #[sabi(last_prefix_field)]
    fn reference_resolver(&self) -> SessionReferenceResolverBox;
}

/// The owned, type-erased instance the host holds.
pub type PluginInstanceBox = PluginInstance_TO<RBox<()>>;

/// The root module a plugin library exports with `#[export_root_module]`. A prefix type: a later minor
/// appends fields after `new`, and a host reads them only from plugins whose contract has them.
// abi_stable names the prefix reference type `PluginRoot_Ref`; the name is part of its derive contract.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginRoot_Ref)))]
#[sabi(missing_field(panic))]
pub struct PluginRoot {
    /// The contract the plugin was built against (also in its [`super::version::ContractStamp`]).
    pub contract: ContractVersion,
    /// [`dsh_codec::FOLD_VERSION`] as the plugin was built.
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
    ) -> RResult<PluginInstanceBox, PluginError>,
}

impl RootModule for PluginRoot_Ref {
    declare_root_module_statics! {PluginRoot_Ref}
    const BASE_NAME: &'static str = ROOT_BASE_NAME;
    const NAME: &'static str = "dsh session plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
