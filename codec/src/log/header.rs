//! The session header (spec §1.3): parsing with the leniency of DESIGN.md deviation 3, and strict writing.

use serde_json::{Map, Value};

use super::error::{clip_for_message, LogError, LogErrorCode};
use crate::json::{is_negative_zero, safe_uint};

/// The on-disk format version this build reads and writes.
pub const FORMAT_VERSION: i64 = 0;

/// A session header. Optional keys are `None` when absent; on disk they are omitted, never `null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHeader {
    pub version: i64,
    pub id: String,
    pub created_at: i64,
    pub cwd: Option<String>,
    pub parent_session: Option<String>,
    pub seed_length: Option<u64>,
    /// `Some("subagent")` or absent.
    pub origin: Option<String>,
    /// Absent only on live sessions created without it; every comparison treats absent as 0.
    pub delegation_depth: Option<u64>,
    pub agent_preset: Option<String>,
}

/// Something a lenient read accepted that a strict v0 reader would refuse. Nothing is lost; the header is
/// usable as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderDiagnostic {
    MissingVersion,
    MissingDelegationDepth,
    /// The cwd is not an absolute path (relative, or a template placeholder such as `{{cwd}}`).
    NonAbsoluteCwd(String),
}

impl std::fmt::Display for HeaderDiagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MissingVersion => f.write_str("header has no version; read as 0"),
            Self::MissingDelegationDepth => f.write_str("header has no delegationDepth; read as 0"),
            Self::NonAbsoluteCwd(cwd) => write!(
                f,
                "header cwd {:?} is not an absolute path",
                clip_for_message(cwd)
            ),
        }
    }
}

impl SessionHeader {
    /// A fresh top-level header, as this project's writer creates it.
    pub fn new(id: impl Into<String>, created_at: i64, cwd: Option<String>) -> Self {
        Self {
            version: FORMAT_VERSION,
            id: id.into(),
            created_at,
            cwd,
            parent_session: None,
            seed_length: None,
            origin: None,
            delegation_depth: Some(0),
            agent_preset: None,
        }
    }

    /// The delegation depth with absent read as 0, as every comparison does.
    pub fn depth(&self) -> u64 {
        self.delegation_depth.unwrap_or(0)
    }

    /// Whether two headers describe the same session for the live/persisted merge (spec §4.8): equal
    /// version, id, createdAt, cwd, parentSession, seedLength and delegationDepth (absent = 0).
    pub fn compatible_with(&self, other: &Self) -> bool {
        self.version == other.version
            && self.id == other.id
            && self.created_at == other.created_at
            && self.cwd == other.cwd
            && self.parent_session == other.parent_session
            && self.seed_length == other.seed_length
            && self.depth() == other.depth()
    }

    /// Parses a header record. `strict` applies spec §1.3 to the letter; otherwise a missing `version` or
    /// `delegationDepth` reads as 0 and a non-absolute cwd is accepted, each with a diagnostic.
    pub fn parse(bytes: &[u8], strict: bool) -> Result<(Self, Vec<HeaderDiagnostic>), LogError> {
        let value = crate::json::parse_lossy(bytes).map_err(|e| {
            LogError::new(
                LogErrorCode::HeaderNotJson,
                format!("header line is not valid JSON: {e}"),
            )
            .at_line(1)
        })?;
        Self::from_value(&value, strict).map_err(|e| e.at_line(1))
    }

    /// Validates a parsed header value (see [`SessionHeader::parse`]).
    pub fn from_value(
        value: &Value,
        strict: bool,
    ) -> Result<(Self, Vec<HeaderDiagnostic>), LogError> {
        let not_header = |why: &str| {
            LogError::new(
                LogErrorCode::InvalidHeader,
                format!("first line is not a session header: {why}"),
            )
        };
        let Value::Object(map) = value else {
            return Err(not_header("not a JSON object"));
        };
        // Version refusal comes before any shape check (spec §1.3 step 2).
        if let Some(Value::Number(n)) = map.get("version") {
            let v = n.as_f64().unwrap_or(f64::NAN);
            if v > FORMAT_VERSION as f64 {
                return Err(LogError::new(
                    LogErrorCode::NewerFormat,
                    format!("session log format version {n} was written by a newer harness — upgrade to read it"),
                ));
            }
            if v < FORMAT_VERSION as f64 || v.is_nan() {
                return Err(LogError::new(
                    LogErrorCode::OlderFormat,
                    format!(
                        "session log format version {n} is older than the supported v0, and this build ships no upgrade path"
                    ),
                ));
            }
        }
        let mut diagnostics = Vec::new();
        if map.get("type").and_then(Value::as_str) != Some("session") {
            return Err(not_header("type is not \"session\""));
        }
        let version = match map.get("version") {
            Some(Value::Number(_)) => FORMAT_VERSION,
            Some(_) => return Err(not_header("version is not a number")),
            None if strict => return Err(not_header("version is missing")),
            None => {
                diagnostics.push(HeaderDiagnostic::MissingVersion);
                FORMAT_VERSION
            }
        };
        let id = match map.get("id") {
            Some(Value::String(s)) => s.clone(),
            _ => return Err(not_header("id is not a string")),
        };
        let created_at = map
            .get("createdAt")
            .filter(|v| !is_negative_zero(v))
            .and_then(safe_uint)
            .ok_or_else(|| not_header("createdAt is not a safe integer ≥ 0"))?
            as i64;
        let delegation_depth = match map.get("delegationDepth") {
            None if strict => return Err(not_header("delegationDepth is missing")),
            None => {
                diagnostics.push(HeaderDiagnostic::MissingDelegationDepth);
                Some(0)
            }
            Some(v) if is_negative_zero(v) => return Err(not_header("delegationDepth is -0")),
            Some(v) => Some(
                safe_uint(v)
                    .ok_or_else(|| not_header("delegationDepth is not a safe integer ≥ 0"))?,
            ),
        };
        let origin = match map.get("origin") {
            None => None,
            Some(Value::String(s)) if s == "subagent" => Some(s.clone()),
            Some(_) => return Err(not_header("origin is not \"subagent\"")),
        };
        let agent_preset = optional_string(map, "agentPreset")
            .map_err(|_| not_header("agentPreset is not a string"))?;
        if map.contains_key("sandboxMode") || map.contains_key("approvalPolicy") {
            return Err(LogError::new(
                LogErrorCode::RetiredHeaderFields,
                "session header carries retired policy baseline fields (sandboxMode/approvalPolicy)",
            ));
        }
        let cwd = optional_string(map, "cwd").map_err(|_| not_header("cwd is not a string"))?;
        if let Some(cwd) = &cwd {
            if cwd.is_empty() {
                return Err(not_header("cwd is empty"));
            }
            if !cwd.starts_with('/') {
                if strict {
                    return Err(not_header("cwd is not an absolute path"));
                }
                diagnostics.push(HeaderDiagnostic::NonAbsoluteCwd(cwd.clone()));
            }
        }
        let parent_session = optional_string(map, "parentSession")
            .map_err(|_| not_header("parentSession is not a string"))?;
        let seed_length = match map.get("seedLength") {
            None => None,
            Some(v) => Some(
                safe_uint(v).ok_or_else(|| not_header("seedLength is not a safe integer ≥ 0"))?,
            ),
        };
        Ok((
            Self {
                version,
                id,
                created_at,
                cwd,
                parent_session,
                seed_length,
                origin,
                delegation_depth,
                agent_preset,
            },
            diagnostics,
        ))
    }

    /// The header as strict v0 JSON, keys in DSH's order, optional keys omitted.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), "session".into());
        map.insert("version".into(), self.version.into());
        map.insert("id".into(), self.id.clone().into());
        map.insert("createdAt".into(), self.created_at.into());
        if let Some(cwd) = &self.cwd {
            map.insert("cwd".into(), cwd.clone().into());
        }
        if let Some(parent) = &self.parent_session {
            map.insert("parentSession".into(), parent.clone().into());
        }
        if let Some(n) = self.seed_length {
            map.insert("seedLength".into(), n.into());
        }
        if let Some(origin) = &self.origin {
            map.insert("origin".into(), origin.clone().into());
        }
        map.insert("delegationDepth".into(), self.depth().into());
        if let Some(preset) = &self.agent_preset {
            map.insert("agentPreset".into(), preset.clone().into());
        }
        Value::Object(map)
    }

    /// The header as one JSON line without the trailing LF.
    pub fn to_json_line(&self) -> String {
        self.to_value().to_string()
    }
}

fn optional_string(map: &Map<String, Value>, key: &str) -> Result<Option<String>, ()> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_header_round_trips() {
        let line = br#"{"type":"session","version":0,"id":"a","createdAt":5,"cwd":"/w","delegationDepth":0}"#;
        let (h, diags) = SessionHeader::parse(line, true).unwrap();
        assert!(diags.is_empty());
        assert_eq!(h.to_json_line().as_bytes(), line);
    }

    #[test]
    fn lenient_header_reads_missing_fields_as_zero_with_diagnostics() {
        let line = br#"{"type":"session","id":"a","createdAt":5,"cwd":"{{cwd}}"}"#;
        let (h, diags) = SessionHeader::parse(line, false).unwrap();
        assert_eq!(h.version, 0);
        assert_eq!(h.delegation_depth, Some(0));
        assert_eq!(diags.len(), 3);
        let err = SessionHeader::parse(line, true).unwrap_err();
        assert_eq!(err.code, LogErrorCode::InvalidHeader);
    }

    #[test]
    fn newer_and_older_versions_are_refused_before_shape_checks() {
        let err = SessionHeader::parse(br#"{"version":1}"#, false).unwrap_err();
        assert_eq!(err.code, LogErrorCode::NewerFormat);
        let err = SessionHeader::parse(br#"{"version":-1}"#, false).unwrap_err();
        assert_eq!(err.code, LogErrorCode::OlderFormat);
    }

    #[test]
    fn retired_fields_and_bad_shapes_are_refused() {
        let err = SessionHeader::parse(
            br#"{"type":"session","version":0,"id":"a","createdAt":5,"delegationDepth":0,"sandboxMode":"x"}"#,
            false,
        )
        .unwrap_err();
        assert_eq!(err.code, LogErrorCode::RetiredHeaderFields);
        for bad in [
            &br#"{"type":"session","version":0,"id":1,"createdAt":5,"delegationDepth":0}"#[..],
            br#"{"type":"session","version":0,"id":"a","createdAt":-0.0,"delegationDepth":0}"#,
            br#"{"type":"session","version":0,"id":"a","createdAt":5,"delegationDepth":0,"origin":"x"}"#,
            br#"{"type":"other","version":0,"id":"a","createdAt":5,"delegationDepth":0}"#,
            br#"[1]"#,
        ] {
            assert_eq!(SessionHeader::parse(bad, false).unwrap_err().code, LogErrorCode::InvalidHeader);
        }
        assert_eq!(
            SessionHeader::parse(b"{nope", false).unwrap_err().code,
            LogErrorCode::HeaderNotJson
        );
    }
}
