//! The contract version and the rule for which plugin a host may load.
//!
//! Policy (ARCHITECTURE.md, "Evolving the ABI", says the same for people):
//! - The contract is `major.minor`. Within a major, a minor only **appends**: a method at the end of a
//!   trait's vtable (after its `#[sabi(last_prefix_field)]`), a field at the end of the root module, a
//!   field (with a documented default) in a JSON record, a new error code number. Nothing is removed,
//!   reordered or retyped.
//! - A host loads a plugin of its own major whose minor is **not newer** than its own: the host then knows
//!   every method the plugin has. A plugin of an older minor keeps working: the host never calls a method
//!   that plugin's minor lacks and answers such a call itself with the documented default.
//! - Anything else is a new major, and a host refuses a plugin of another major with the reason.
//!
//! The version is read from a tiny C symbol ([`ContractStamp`]) *before* abi_stable's layout check, so a
//! plugin of another major is refused as such even when its layouts no longer resemble ours.

use abi_stable::StableAbi;
use serde::Serialize;
use std::fmt;

/// A contract version, `major.minor`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ContractVersion {
    pub major: u16,
    pub minor: u16,
}

/// The contract this build implements.
///
/// History: 2.0 made the contract evolvable (open error codes, JSON records, per-call context, plugin
/// instance and services as prefix-typed vtables); 2.1 appended `SessionQuery::diagnostics` and
/// `HostContext::report_progress`; 2.2 appended the search requests' `match` and `order` fields.
pub const CONTRACT: ContractVersion = ContractVersion { major: 2, minor: 2 };

/// Minor 1 added `SessionQuery::diagnostics` and `HostContext::report_progress`.
pub const MINOR_DIAGNOSTICS: u16 = 1;

/// Minor 2 added the search requests' `match` (`"phrase"` | `"all-words"`) and `order` (`"rank"` |
/// `"newest"`) fields. An older plugin ignores them (unknown JSON fields) and answers with the phrase
/// semantics and spec order, so the host must know not to claim otherwise.
pub const MINOR_SEARCH_MODES: u16 = 2;

impl fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl ContractVersion {
    /// Whether a host speaking `self` may load a plugin built against `plugin`, and if not, why.
    pub fn accepts(self, plugin: ContractVersion) -> Result<(), String> {
        if plugin.major != self.major {
            return Err(format!(
                "it was built against plugin contract {plugin}, another major than this host's {self}; \
                 rebuild it against contract {}.x",
                self.major
            ));
        }
        if plugin.minor > self.minor {
            return Err(format!(
                "it was built against plugin contract {plugin}, newer than this host's {self}; \
                 update the host or build the plugin against contract {self} or older"
            ));
        }
        Ok(())
    }

    /// Whether a peer of this version has what minor `minor` added.
    pub fn has_minor(self, minor: u16) -> bool {
        self.minor >= minor
    }
}

/// The name of the C symbol every plugin exports with its [`ContractStamp`].
pub const CONTRACT_SYMBOL: &str = "dsh_plugin_contract";

/// `"DSHP"`: marks a [`ContractStamp`], so an unrelated symbol of that name is not read as one.
pub const CONTRACT_MAGIC: u32 = 0x4453_4850;

/// What a plugin exports under [`CONTRACT_SYMBOL`]: plain C data whose layout never changes across
/// majors, so any host can read it before trusting anything else in the library.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContractStamp {
    pub magic: u32,
    pub major: u16,
    pub minor: u16,
    /// [`dsh_codec::FOLD_VERSION`] as the plugin was built.
    pub fold_version: u32,
}

impl ContractStamp {
    /// The stamp of a plugin built against this crate.
    pub const fn current() -> Self {
        Self {
            magic: CONTRACT_MAGIC,
            major: CONTRACT.major,
            minor: CONTRACT.minor,
            fold_version: dsh_codec::FOLD_VERSION,
        }
    }

    pub fn contract(&self) -> ContractVersion {
        ContractVersion {
            major: self.major,
            minor: self.minor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn v(major: u16, minor: u16) -> ContractVersion {
        ContractVersion { major, minor }
    }

    #[test]
    fn same_major_older_or_equal_minor_is_accepted() {
        assert!(v(2, 1).accepts(v(2, 0)).is_ok());
        assert!(v(2, 1).accepts(v(2, 1)).is_ok());
    }

    #[test]
    fn newer_minor_and_other_major_are_refused_with_the_reason() {
        let newer = v(2, 1).accepts(v(2, 2)).unwrap_err();
        assert!(newer.contains("2.2") && newer.contains("newer"), "{newer}");
        let other = v(2, 1).accepts(v(3, 0)).unwrap_err();
        assert!(
            other.contains("3.0") && other.contains("another major"),
            "{other}"
        );
        let older = v(2, 1).accepts(v(1, 9)).unwrap_err();
        assert!(older.contains("another major"), "{older}");
    }
}
