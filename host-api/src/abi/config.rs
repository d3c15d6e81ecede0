//! The constructor's config document as the contract sees it: which keys each minor's plugins know.
//!
//! A plugin built before contract 2.2 refuses a config key it does not know (it was built with a
//! strict parser), so one new key from a newer host would stop an older plugin from starting. From 2.2
//! on plugins ignore unknown keys and report them in `diagnostics`; for the older ones the host sends
//! only the keys their minor knows ([`fit_for`]).

use serde_json::{Map, Value};

use super::version::ContractVersion;

/// Config keys added after contract 2.0, with the minor whose plugins first read them. Every key not
/// listed here is one a 2.0 plugin already knew.
pub const KEYS_SINCE: &[(&str, u16)] = &[("longLived", 2), ("claudeProjects", 2), ("codexHome", 2)];

/// The first minor whose plugins ignore unknown config keys instead of refusing them.
pub const MINOR_OPEN_CONFIG: u16 = 2;

/// The config a plugin of `contract` is given, and the keys left out for it (the host logs them).
/// A plugin of [`MINOR_OPEN_CONFIG`] or later gets the document unchanged.
pub fn fit_for(
    contract: ContractVersion,
    config: &Map<String, Value>,
) -> (Map<String, Value>, Vec<String>) {
    if contract.has_minor(MINOR_OPEN_CONFIG) {
        return (config.clone(), Vec::new());
    }
    let mut dropped = Vec::new();
    let fitted = config
        .iter()
        .filter(|(key, _)| {
            let newer = KEYS_SINCE
                .iter()
                .any(|(known, since)| known == key && !contract.has_minor(*since));
            if newer {
                dropped.push(key.to_string());
            }
            !newer
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (fitted, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_plugin_is_sent_only_the_keys_its_minor_knows() {
        let config: Map<String, Value> = serde_json::from_str(
            r#"{"indexPath":"/i","snippetChars":100,"longLived":false,"claudeProjects":"/c","codexHome":"/x"}"#,
        )
        .unwrap();
        for minor in [0, 1] {
            let (fitted, dropped) = fit_for(ContractVersion { major: 2, minor }, &config);
            assert_eq!(
                fitted.keys().collect::<Vec<_>>(),
                ["indexPath", "snippetChars"],
                "2.{minor}"
            );
            assert_eq!(dropped, ["claudeProjects", "codexHome", "longLived"]);
        }
        let (fitted, dropped) = fit_for(ContractVersion { major: 2, minor: 2 }, &config);
        assert_eq!(fitted, config);
        assert!(dropped.is_empty());
    }
}
