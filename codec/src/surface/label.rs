//! The three-state surface label of an event (spec §2.2), with its stable wire spelling.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where an event stands relative to the model-visible surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Label {
    /// On the current surface: the model sees its message.
    Current,
    /// Was on the surface until a replacement covered it (compaction, prune); kept in the log only.
    Shadowed,
    /// Never on the surface (every non-message event).
    LogOnly,
}

impl Label {
    /// All labels, in the order filters and reports list them.
    pub const ALL: [Label; 3] = [Label::Current, Label::Shadowed, Label::LogOnly];

    /// The spelling used in search results, filters and the index: `current`, `shadowed`, `log-only`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Current => "current",
            Self::Shadowed => "shadowed",
            Self::LogOnly => "log-only",
        }
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of the three label spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown surface label {0:?}; expected current, shadowed or log-only")]
pub struct ParseLabelError(pub String);

impl FromStr for Label {
    type Err = ParseLabelError;

    /// Exact spellings only: labels are a wire contract, so `Current` or `log_only` are errors.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "current" => Ok(Self::Current),
            "shadowed" => Ok(Self::Shadowed),
            "log-only" => Ok(Self::LogOnly),
            other => Err(ParseLabelError(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for label in Label::ALL {
            assert_eq!(label.as_str().parse::<Label>(), Ok(label));
            assert_eq!(label.to_string(), label.as_str());
            let json = serde_json::to_string(&label).unwrap();
            assert_eq!(json, format!("\"{}\"", label.as_str()));
            assert_eq!(serde_json::from_str::<Label>(&json).unwrap(), label);
        }
        assert!("log_only".parse::<Label>().is_err());
        assert!("Current".parse::<Label>().is_err());
    }
}
