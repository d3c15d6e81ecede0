//! The contract evolves by appending only: every frozen minor's layout must still be a prefix of
//! today's types, checked with abi_stable's own layout checker.
//!
//! The host checks an older plugin exactly against its minor's frozen copy and then calls it through
//! today's types (`init_root_module_with_unchecked_layout`). That is sound only while today's types
//! equal the frozen ones up to each prefix's last field; this test is what makes a retyped or reordered
//! method fail CI instead of becoming undefined behaviour at run time.

use abi_stable::{
    abi_stability::abi_checking::{
        check_layout_compatibility, check_layout_compatibility_with_globals, CheckingGlobals,
    },
    StableAbi,
};
use host_api::abi;
use host_api::abi::frozen;

/// `frozen` is the interface an older plugin was built against; today's type plays the library that
/// must offer at least that prefix, field for field.
///
/// Each minor is checked with globals of its own: abi_stable merges what it learns of a prefix type
/// (keyed by the type) into its process-wide globals, and here today's types play the library for
/// every minor, which no real load does (a host checks a frozen minor against the plugin's own types).
fn assert_extends<Frozen: StableAbi, Today: StableAbi>(what: &str, globals: &CheckingGlobals) {
    if let Err(e) = check_layout_compatibility_with_globals(Frozen::LAYOUT, Today::LAYOUT, globals)
    {
        panic!("today's {what} no longer extends the frozen one: {e}");
    }
}

/// Every contract type a frozen minor `$m` (a module of `host_api::abi::frozen`) fixed, checked against
/// today's.
macro_rules! assert_minor_extends {
    ($m:ident, $name:literal) => {{
        use frozen::$m as old;
        let globals = CheckingGlobals::new();
        assert_extends::<old::PluginRoot_Ref, abi::PluginRoot_Ref>(
            concat!("PluginRoot (", $name, ")"),
            &globals,
        );
        assert_extends::<old::PluginInstanceBox, abi::PluginInstanceBox>(
            concat!("PluginInstance (", $name, ")"),
            &globals,
        );
        assert_extends::<old::HostContextBox, abi::HostContextBox>(
            concat!("HostContext (", $name, ")"),
            &globals,
        );
        assert_extends::<old::SessionQueryBox, abi::SessionQueryBox>(
            concat!("SessionQuery (", $name, ")"),
            &globals,
        );
        assert_extends::<old::SessionReferenceResolverBox, abi::SessionReferenceResolverBox>(
            concat!("SessionReferenceResolver (", $name, ")"),
            &globals,
        );
        assert_extends::<old::CallRef<'static>, abi::CallRef<'static>>(
            concat!("CallContext (", $name, ")"),
            &globals,
        );
        assert_extends::<old::PluginError, abi::PluginError>(
            concat!("PluginError (", $name, ")"),
            &globals,
        );
    }};
}

#[test]
fn todays_contract_extends_frozen_2_0() {
    assert_minor_extends!(v2_0, "2.0");
}

#[test]
fn todays_contract_extends_frozen_2_1() {
    assert_minor_extends!(v2_1, "2.1");
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
