//! Candidate labels a person can tell apart: a label never ends inside a code span (a title cut in the
//! middle of `` `…` `` is cut back to before the span), and labels that repeat among the candidates
//! (several sessions titled "Add a unit test for") gain what sets them apart: the cwd's last folder,
//! then the day, then the id's first characters. The mention is rebuilt with the new label.

use std::collections::HashMap;

use serde_json::Value;

use super::mention;

/// A label cut inside a code span (an odd number of backticks) loses the unclosed span.
pub fn whole_code_spans(label: &str) -> String {
    if label.matches('`').count().is_multiple_of(2) {
        return label.to_string();
    }
    let cut = label.rfind('`').unwrap_or(label.len());
    let head = label[..cut].trim_end();
    if head.is_empty() {
        label.replace('`', "")
    } else {
        format!("{head}…")
    }
}

/// What tells apart candidates whose labels repeat (the cwd's last folder, the day, the id's start).
type Distinguisher = dyn Fn(&Value) -> Option<String>;

/// Rewrites the candidates' `label` and `mention` so every label is whole and unique.
pub fn make_unique(candidates: &mut [Value]) {
    for c in candidates.iter_mut() {
        let label = whole_code_spans(c["label"].as_str().unwrap_or(""));
        c["label"] = label.into();
    }
    let keys: [&Distinguisher; 3] = [
        &|c| {
            c["cwd"]
                .as_str()
                .and_then(|p| p.trim_end_matches('/').rsplit('/').next())
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        },
        &|c| {
            c["createdAt"]
                .as_i64()
                .map(|ms| crate::present::local_time(ms)[..10].to_string())
        },
        &|c| {
            c["sessionId"]
                .as_str()
                .map(|id| id.chars().take(8).collect())
        },
    ];
    let original: Vec<String> = candidates
        .iter()
        .map(|c| c["label"].as_str().unwrap_or("").to_string())
        .collect();
    let mut labels = original.clone();
    let mut extras: Vec<Vec<String>> = vec![Vec::new(); candidates.len()];
    for key in keys {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for l in &labels {
            *seen.entry(l.as_str()).or_default() += 1;
        }
        let repeated: Vec<bool> = labels.iter().map(|l| seen[l.as_str()] > 1).collect();
        if !repeated.contains(&true) {
            break;
        }
        for (i, c) in candidates.iter().enumerate() {
            if repeated[i] {
                if let Some(extra) = key(c) {
                    extras[i].push(extra);
                }
            }
        }
        labels = original
            .iter()
            .zip(&extras)
            .map(|(l, e)| {
                if e.is_empty() {
                    l.clone()
                } else {
                    format!("{l} ({})", e.join(", "))
                }
            })
            .collect();
    }
    for (c, label) in candidates.iter_mut().zip(labels) {
        if c["label"].as_str() != Some(label.as_str()) {
            let id = c["sessionId"].as_str().unwrap_or("").to_string();
            c["mention"] = mention::format(&id, Some(&label)).into();
            c["label"] = label.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_label_is_never_cut_inside_a_code_span() {
        assert_eq!(whole_code_spans("Fix `Parser::close_arr"), "Fix…");
        assert_eq!(
            whole_code_spans("Fix `close_array` now"),
            "Fix `close_array` now"
        );
    }

    #[test]
    fn repeated_labels_gain_the_cwd_then_the_day() {
        let mut list = vec![
            json!({"sessionId": "a1", "label": "Add a unit test for", "cwd": "/w/alpha", "createdAt": 0, "mention": ""}),
            json!({"sessionId": "b2", "label": "Add a unit test for", "cwd": "/w/beta", "createdAt": 0, "mention": ""}),
            json!({"sessionId": "c3", "label": "Other", "cwd": "/w/beta", "createdAt": 0, "mention": ""}),
        ];
        make_unique(&mut list);
        assert_eq!(list[0]["label"], "Add a unit test for (alpha)");
        assert_eq!(list[1]["label"], "Add a unit test for (beta)");
        assert_eq!(list[2]["label"], "Other");
        assert!(list[0]["mention"].as_str().unwrap().contains("(alpha)"));
        let mut same = vec![
            json!({"sessionId": "a1", "label": "T", "cwd": "/w", "createdAt": 0}),
            json!({"sessionId": "b2", "label": "T", "cwd": "/w", "createdAt": 0}),
        ];
        make_unique(&mut same);
        assert_ne!(same[0]["label"], same[1]["label"]);
    }
}
