//! Session ids as people type them: a unique prefix (`events 335e97f7`) stands for the whole id, an
//! ambiguous prefix is an error listing the candidates, and a near miss gets "did you mean".
//!
//! An id is only looked up when the exact one is not found, so full ids cost nothing extra.

use host_api::abi::{EmptyRequest, ErrorCode, PluginError};

use super::CommandError;
use crate::render::quote_id;
use crate::PluginHost;

/// How many candidates an ambiguous-prefix error lists.
const LISTED: usize = 5;

/// What a typed id names among `ids`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Exactly one id (the typed one, or the only one it prefixes).
    One(String),
    /// Several ids start with it (sorted, all of them).
    Ambiguous(Vec<String>),
    /// None; the closest id, if one is close.
    Missing(Option<String>),
}

/// Resolves `typed` against the known ids.
pub fn resolve<'a>(typed: &str, ids: impl IntoIterator<Item = &'a str>) -> Resolved {
    let ids: Vec<&str> = ids.into_iter().collect();
    if ids.contains(&typed) {
        return Resolved::One(typed.to_string());
    }
    let mut starting: Vec<String> = if typed.is_empty() {
        Vec::new()
    } else {
        ids.iter()
            .filter(|id| id.starts_with(typed))
            .map(|id| id.to_string())
            .collect()
    };
    starting.sort();
    starting.dedup();
    match starting.len() {
        1 => Resolved::One(starting.remove(0)),
        0 => Resolved::Missing(closest(typed, &ids)),
        _ => Resolved::Ambiguous(starting),
    }
}

/// The id nearest to `typed` (compared with as much of each id as was typed, so a mistyped prefix
/// finds its id too), if it is near enough to be a typo.
fn closest(typed: &str, ids: &[&str]) -> Option<String> {
    let n = typed.chars().count();
    ids.iter()
        .map(|id| {
            let head: String = id.chars().take(n.max(1)).collect();
            let d = strsim::damerau_levenshtein(typed, &head)
                .min(strsim::damerau_levenshtein(typed, id));
            (d, *id)
        })
        .filter(|(d, _)| *d <= (n / 4).clamp(1, 3))
        .min()
        .map(|(_, id)| id.to_string())
}

/// Runs `read` with the typed id; when the plugin does not know that id, resolves it as a prefix among
/// the listed sessions and runs `read` again with the whole id. Returns the id used and the answer.
pub fn with_session<T>(
    host: &PluginHost,
    typed: &str,
    mut read: impl FnMut(&str) -> Result<T, PluginError>,
) -> Result<(String, T), CommandError> {
    match read(typed) {
        Err(e) if e.code == ErrorCode::SessionQuerySessionNotFound => {
            let list = host
                .query(|q| q.list_sessions(&super::calls::call(), &EmptyRequest {}))
                .map_err(CommandError::Plugin)?;
            match resolve(typed, list.iter().map(|r| r.header.id.as_str())) {
                Resolved::One(id) if id != typed => {
                    let answer = read(&id).map_err(|e| super::about_id(e, &id))?;
                    Ok((id, answer))
                }
                Resolved::One(_) => Err(super::about_id(e, typed)),
                Resolved::Ambiguous(ids) => Err(CommandError::Ambiguous(format!(
                    "session id prefix {} is ambiguous: {} sessions start with it ({}{}); type more of the id",
                    quote_id(typed),
                    ids.len(),
                    ids.iter()
                        .take(LISTED)
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(", "),
                    if ids.len() > LISTED { ", …" } else { "" }
                ))),
                Resolved::Missing(near) => {
                    let mut message = format!("session {} not found", quote_id(typed));
                    match near {
                        Some(id) => message.push_str(&format!("; did you mean {id}?")),
                        None => message.push_str(
                            "; `sessions` lists every session (a unique prefix of an id is enough)",
                        ),
                    }
                    Err(CommandError::Plugin(PluginError::new(e.code, message)))
                }
            }
        }
        Err(e) => Err(super::about_id(e, typed)),
        Ok(answer) => Ok((typed.to_string(), answer)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: [&str; 4] = [
        "335e97f7-1111-4a4a-8888-000000000001",
        "335e97f7-2222-4a4a-8888-000000000002",
        "9c0ffee0-3333-4a4a-8888-000000000003",
        "demo-ci-fix",
    ];

    #[test]
    fn a_unique_prefix_is_the_whole_id() {
        assert_eq!(
            resolve("9c0f", IDS),
            Resolved::One("9c0ffee0-3333-4a4a-8888-000000000003".into())
        );
        assert_eq!(
            resolve("demo-ci-fix", IDS),
            Resolved::One("demo-ci-fix".into())
        );
    }

    #[test]
    fn a_shared_prefix_is_ambiguous() {
        match resolve("335e97f7", IDS) {
            Resolved::Ambiguous(ids) => assert_eq!(ids.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_near_miss_gets_a_suggestion_and_a_far_one_none() {
        assert_eq!(
            resolve("demo-ci-fxi", IDS),
            Resolved::Missing(Some("demo-ci-fix".into()))
        );
        assert_eq!(
            resolve("9c0fefe0", IDS),
            Resolved::Missing(Some("9c0ffee0-3333-4a4a-8888-000000000003".into()))
        );
        assert_eq!(resolve("zzzzzzzzzz", IDS), Resolved::Missing(None));
    }
}
