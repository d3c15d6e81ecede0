//! The constructor's config document as the contract sees it: which keys each minor's plugins know.
//!
//! A plugin built before contract 2.2 refuses a config key it does not know (it was built with a
//! strict parser), so one new key from a newer host would stop an older plugin from starting. From 2.2
//! on plugins ignore unknown keys and report them in `diagnostics`; for the older ones the host sends
//! only the keys their minor knows ([`fit_for`]).

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

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
        .filter(|(key, value)| {
            // A path in bytes is 2.2's form too: an older plugin reads only strings.
            let newer = KEYS_SINCE
                .iter()
                .any(|(known, since)| known == key && !contract.has_minor(*since))
                || (value.is_object() && path_from_value(value).is_some());
            if newer {
                dropped.push(key.to_string());
            }
            !newer
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (fitted, dropped)
}

/// A path as a config value: a JSON string when it is UTF-8, else `{"bytes": [..]}` with the OS's
/// bytes (a JSON string cannot hold them, and a lossy one names another file). Hosts send the object
/// form only for a path that needs it, so a plugin from before 2.2 never sees one for a path it could
/// have read.
pub fn path_value(path: &Path) -> Value {
    match path.to_str() {
        Some(text) => Value::String(text.to_string()),
        None => {
            use std::os::unix::ffi::OsStrExt;
            json!({ "bytes": path.as_os_str().as_bytes() })
        }
    }
}

/// The path a config value names ([`path_value`]'s inverse); `None` when it is neither form.
pub fn path_from_value(value: &Value) -> Option<PathBuf> {
    match value {
        Value::String(text) => Some(PathBuf::from(text)),
        Value::Object(object) if object.len() == 1 => {
            use std::os::unix::ffi::OsStringExt;
            let bytes = object
                .get("bytes")?
                .as_array()?
                .iter()
                .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect::<Option<Vec<u8>>>()?;
            Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_is_not_utf8_crosses_as_its_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let odd = Path::new(std::ffi::OsStr::from_bytes(b"/tmp/sessions-\xff"));
        let value = path_value(odd);
        assert!(value.is_object(), "{value}");
        assert_eq!(path_from_value(&value).as_deref(), Some(odd));
        assert_eq!(path_value(Path::new("/a/b")), json!("/a/b"));
        assert_eq!(path_from_value(&json!("/a/b")), Some(PathBuf::from("/a/b")));
        for bad in [
            json!(1),
            json!({"bytes": [256]}),
            json!({"bytes": "x"}),
            json!({"other": 1}),
        ] {
            assert_eq!(path_from_value(&bad), None, "{bad}");
        }
    }

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
            assert_eq!(dropped, ["longLived", "claudeProjects", "codexHome"]);
        }
        let (fitted, dropped) = fit_for(ContractVersion { major: 2, minor: 2 }, &config);
        assert_eq!(fitted, config);
        assert!(dropped.is_empty());
        let bytes: Map<String, Value> =
            serde_json::from_str(r#"{"sessionsRoot":{"bytes":[47,255]},"indexPath":"/i"}"#)
                .unwrap();
        let (fitted, dropped) = fit_for(ContractVersion { major: 2, minor: 1 }, &bytes);
        assert_eq!(fitted.keys().collect::<Vec<_>>(), ["indexPath"]);
        assert_eq!(dropped, ["sessionsRoot"]);
    }
}
