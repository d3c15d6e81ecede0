//! Test fixture: an abi_stable library whose root module has the plugin's name but another layout, as a
//! plugin built against incompatible contracts would. abi_stable's layout check must refuse it.

// abi_stable's derive names the prefix reference type `PluginRoot_Ref`.
#![allow(non_camel_case_types, non_local_definitions)]

use abi_stable::{
    declare_root_module_statics, export_root_module, library::RootModule, package_version_strings,
    prefix_type::PrefixTypeTrait, sabi_types::VersionStrings, std_types::RStr, StableAbi,
};

/// Same base name as the real root module, different fields.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginRoot_Ref)))]
#[sabi(missing_field(panic))]
pub struct PluginRoot {
    pub abi_version: u64,
    #[sabi(last_prefix_field)]
    pub name: RStr<'static>,
}

impl RootModule for PluginRoot_Ref {
    declare_root_module_statics! {PluginRoot_Ref}
    const BASE_NAME: &'static str = "dsh_session_search";
    const NAME: &'static str = "dsh session plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

/// A valid stamp of this host's contract, so the host gets as far as abi_stable's layout check.
#[no_mangle]
pub static dsh_plugin_contract: host_api::abi::ContractStamp =
    host_api::abi::ContractStamp::current();

/// The mismatched root module.
#[export_root_module]
pub fn get_root_module() -> PluginRoot_Ref {
    PluginRoot {
        abi_version: 1,
        name: RStr::from_str("dsh-session-search"),
    }
    .leak_into_prefix()
}
