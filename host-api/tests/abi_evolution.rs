//! The contract evolves by appending only: every frozen minor's layout must still be a prefix of
//! today's types, checked with abi_stable's own layout checker.
//!
//! The host checks an older plugin exactly against its minor's frozen copy and then calls it through
//! today's types (`init_root_module_with_unchecked_layout`). That is sound only while today's types
//! equal the frozen ones up to each prefix's last field; this test is what makes a retyped or reordered
//! method fail CI instead of becoming undefined behaviour at run time.

use abi_stable::{abi_stability::abi_checking::check_layout_compatibility, StableAbi};
use host_api::abi;
use host_api::abi::frozen;

/// `frozen` is the interface an older plugin was built against; today's type plays the library that
/// must offer at least that prefix, field for field.
fn assert_extends<Frozen: StableAbi, Today: StableAbi>(what: &str) {
    if let Err(e) = check_layout_compatibility(Frozen::LAYOUT, Today::LAYOUT) {
        panic!("today's {what} no longer extends the frozen one: {e}");
    }
}

#[test]
fn todays_contract_extends_frozen_2_0() {
    assert_extends::<frozen::v2_0::PluginRoot_Ref, abi::PluginRoot_Ref>("PluginRoot (2.0)");
    assert_extends::<frozen::v2_0::PluginInstanceBox, abi::PluginInstanceBox>(
        "PluginInstance (2.0)",
    );
    assert_extends::<frozen::v2_0::HostContextBox, abi::HostContextBox>("HostContext (2.0)");
    assert_extends::<frozen::v2_0::SessionQueryBox, abi::SessionQueryBox>("SessionQuery (2.0)");
    assert_extends::<frozen::v2_0::SessionReferenceResolverBox, abi::SessionReferenceResolverBox>(
        "SessionReferenceResolver (2.0)",
    );
    assert_extends::<frozen::v2_0::CallRef<'static>, abi::CallRef<'static>>("CallContext (2.0)");
    assert_extends::<frozen::v2_0::PluginError, abi::PluginError>("PluginError (2.0)");
}

/// A deliberately broken "frozen" copy: `CallContext` as if 2.0 had declared `is_cancelled` returning
/// a `u8`. The checker must refuse it, or the test above proves nothing.
#[allow(non_camel_case_types, non_local_definitions)]
mod broken {
    use abi_stable::{
        sabi_trait,
        sabi_types::RRef,
        std_types::{ROption, RString},
    };

    #[sabi_trait]
    pub trait CallContext: Sync {
        fn is_cancelled(&self) -> u8;
        fn deadline_unix_ms(&self) -> ROption<i64>;
        #[sabi(last_prefix_field)]
        fn calling_session(&self) -> ROption<RString>;
    }

    pub type CallRef<'a> = CallContext_TO<'a, RRef<'a, ()>>;
}

#[test]
fn a_retyped_frozen_method_is_refused_by_the_checker() {
    let err = check_layout_compatibility(
        <broken::CallRef<'static> as StableAbi>::LAYOUT,
        <abi::CallRef<'static> as StableAbi>::LAYOUT,
    )
    .expect_err("a retyped method must not pass the layout check");
    let text = err.to_string();
    assert!(
        text.contains("u8") || text.contains("bool"),
        "the refusal names the types: {text}"
    );
}
