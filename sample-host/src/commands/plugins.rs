//! `sample-host plugins`: the libraries this command found and loaded, which one serves, refused ones
//! and why. It describes its own load, made just now, never the state of another running host.

use std::io::Write;

use host_api::abi::ErrorCode;
use serde_json::{json, Value};

use super::{print, CommandError};
use crate::render::table;
use crate::{PluginHost, SlotState};

/// Said with every listing, so nobody reads it as the state of a `watch` running elsewhere.
pub const SCOPE_NOTE: &str =
    "as loaded by this command just now (not the state of a running host such as `sample-host watch`)";

/// Prints the listing.
pub fn print_status(
    host: &PluginHost,
    as_json: bool,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    let status = host.status();
    if as_json {
        let items: Vec<Value> = status
            .iter()
            .map(|s| {
                let mut v = match &s.state {
                    SlotState::Serving { generation, name, version } => json!({"state": "serving", "generation": generation, "name": name, "version": version}),
                    SlotState::Standby { name, version } => json!({"state": "standby", "name": name, "version": version}),
                    SlotState::Refused { code, reason } => json!({"state": "refused", "code": code, "reason": reason}),
                };
                v["file"] = s.file.display().to_string().into();
                if let Some(note) = &s.note {
                    v["note"] = note.clone().into();
                }
                v
            })
            .collect();
        let mut listing = json!({"scope": SCOPE_NOTE, "pluginsDir": host.plugins_dir().display().to_string(), "mappedLibraries": host.mapped_libraries(), "plugins": items});
        // Nothing serving is this command's failure (exit status 1): under --json every failure carries
        // an `error`, here beside the listing that explains it.
        if host.serving().is_none() {
            listing["error"] = json!({
                "code": ErrorCode::PluginUnavailable.as_str(),
                "message": format!("no plugin library in {} could be loaded", host.plugins_dir().display()),
            });
        }
        return print(out, listing.to_string());
    }
    print(
        out,
        format!(
            "plugin folder: {}\nlibraries {SCOPE_NOTE}:",
            host.plugins_dir().display()
        ),
    )?;
    print_rows(host, out)
}

/// The listing for the host that is running this very command (a chat): what serves it now, every
/// library it has seen since it started, and how many it has mapped.
pub fn print_running_status(host: &PluginHost, out: &mut dyn Write) -> Result<(), CommandError> {
    let serving = match host.serving() {
        Some((generation, name, version)) => {
            format!("{name} {version} serves this chat (generation {generation})")
        }
        None => "no plugin serves this chat".into(),
    };
    print(
        out,
        format!(
            "{serving}; plugin folder {} is watched and rebuilt libraries are swapped in; {} of {} libraries mapped",
            host.plugins_dir().display(),
            host.mapped_libraries(),
            host.max_mapped_libraries()
        ),
    )?;
    print_rows(host, out)
}

fn print_rows(host: &PluginHost, out: &mut dyn Write) -> Result<(), CommandError> {
    let status = host.status();
    let rows: Vec<Vec<String>> = status
        .iter()
        .map(|s| {
            let file = s
                .file
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            let (state, detail) = match &s.state {
                SlotState::Serving {
                    generation,
                    name,
                    version,
                } => (
                    format!("serving (generation {generation})"),
                    format!("{name} {version}"),
                ),
                SlotState::Standby { name, version } => {
                    ("standby".to_string(), format!("{name} {version}"))
                }
                SlotState::Refused { reason, .. } => ("refused".to_string(), reason.clone()),
            };
            let detail = match &s.note {
                Some(note) => format!("{detail}; {note}"),
                None => detail,
            };
            vec![file, state, detail]
        })
        .collect();
    write!(out, "{}", table(&["LIBRARY", "STATE", "DETAIL"], &rows)).map_err(super::out_err)
}
