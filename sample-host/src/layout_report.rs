//! The useful end of abi_stable's layout report, on one line.
//!
//! abi_stable explains a refused library with a report of a hundred lines or more: both sides' full
//! type layouts first, and only at the end what actually differs. A reload line needs that end: which
//! type, its size on each side, the first field that differs, and abi_stable's innermost error. This
//! reads the report's text (its `Display` form, the only stable face it has).

/// At most this many characters of summary; the full report is never needed to act on a refusal.
const MAX_SUMMARY: usize = 600;

/// One side's layout of the type abi_stable stopped at.
#[derive(Debug, Default, PartialEq, Eq)]
struct Side {
    type_name: String,
    size: String,
    package: String,
    /// `(name, type)` of each field, in order.
    fields: Vec<(String, String)>,
}

/// Summarises a report; when it has none of the expected sections, its last lines (where abi_stable
/// puts the innermost error) stand in.
pub fn summarize(report: &str) -> String {
    let lines: Vec<&str> = report
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut parts = Vec::new();
    let expected = side_after(&lines, "Layout of expected type:");
    let found = side_after(&lines, "Layout of found type:");
    if let (Some(e), Some(f)) = (&expected, &found) {
        parts.push(format!(
            "type {} is {} here ({}) but {} in the library ({})",
            e.type_name, e.size, e.package, f.size, f.package
        ));
        if let Some(diff) = first_field_difference(e, f) {
            parts.push(diff);
        }
    }
    let errors = final_errors(&lines);
    if !errors.is_empty() {
        parts.push(errors.join("; "));
    }
    let summary = if parts.is_empty() {
        let start = lines.len().saturating_sub(6);
        lines[start..].join(" | ")
    } else {
        parts.join("; ")
    };
    cut(&summary)
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_SUMMARY {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(MAX_SUMMARY - 1).collect();
        s.push('…');
        s
    }
}

/// The layout printed after `heading`: its first `type:`, `size:` and `package:` lines, then its
/// fields up to `accessible_fields:`.
fn side_after(lines: &[&str], heading: &str) -> Option<Side> {
    let start = lines.iter().rposition(|l| *l == heading)? + 1;
    let mut side = Side::default();
    let mut pending_field: Option<String> = None;
    for line in &lines[start..] {
        if line.starts_with("Layout of ") || line.starts_with("Error:") {
            break;
        }
        if *line == "accessible_fields:" {
            break;
        }
        if let Some(name) = line.strip_prefix("field_name:") {
            pending_field = Some(name.to_string());
        } else if let Some(ty) = line.strip_prefix("type:") {
            match pending_field.take() {
                Some(name) => side.fields.push((name, ty.to_string())),
                None if side.type_name.is_empty() => side.type_name = ty.to_string(),
                None => {}
            }
        } else if side.size.is_empty() && line.starts_with("size:") {
            side.size = line.replace(':', " ");
        } else if side.package.is_empty() && line.starts_with("package:") {
            side.package = line
                .trim_start_matches("package:")
                .replace(" version:", " ")
                .replace('\'', "");
        }
    }
    (!side.type_name.is_empty()).then_some(side)
}

fn first_field_difference(expected: &Side, found: &Side) -> Option<String> {
    let show = |f: Option<&(String, String)>| match f {
        Some((name, ty)) => format!("`{name}: {ty}`"),
        None => "nothing".to_string(),
    };
    let n = expected.fields.len().max(found.fields.len());
    (0..n).find_map(|i| {
        let (e, f) = (expected.fields.get(i), found.fields.get(i));
        (e != f).then(|| {
            format!(
                "field {i} differs: {} here, {} in the library ({} fields here, {} there)",
                show(e),
                show(f),
                expected.fields.len(),
                found.fields.len()
            )
        })
    })
}

/// abi_stable's closing `Error:` blocks (`Error:what` / `Expected:` … / `Found:` …), the last three.
fn final_errors(lines: &[&str]) -> Vec<String> {
    let starts: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("Error:"))
        .map(|(i, _)| i)
        .collect();
    let keep = starts.len().saturating_sub(3);
    starts[keep..]
        .iter()
        .map(|&start| {
            let what = lines[start].trim_start_matches("Error:").trim();
            let end = lines[start + 1..]
                .iter()
                .position(|l| l.starts_with("Error:"))
                .map_or(lines.len(), |p| start + 1 + p);
            let mut expected = Vec::new();
            let mut found = Vec::new();
            let mut into: Option<&mut Vec<String>> = None;
            for line in &lines[start + 1..end] {
                match *line {
                    "Expected:" => into = Some(&mut expected),
                    "Found:" => into = Some(&mut found),
                    other => {
                        if let Some(v) = into.as_mut() {
                            v.push(other.to_string());
                        }
                    }
                }
            }
            if expected.is_empty() && found.is_empty() {
                what.to_string()
            } else {
                format!(
                    "{what}: expected {}, found {}",
                    expected.join(" "),
                    found.join(" ")
                )
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of abi_stable's report for a root module with another layout (abridged: the real one
    /// repeats each layout in full).
    const REPORT: &str = "\
failed abi_stable's layout check of the plugin root module:
Compared <this>:
    --- Type Layout ---
    type:PrefixRef<'a, PluginRoot>
    size:8 align:8
0 error(s).

1 error(s)inside:
    <other>

    field_name:0
    type:PluginRoot
    size:24 align:8

Layout of expected type:
    --- Type Layout ---
    type:PluginRoot
    size:48 align:8
    package:'host-api' version:'0.1.0'
    data:
        Prefix type:
        fields:
            field_name:abi_version
            type:u32
            size:4 align:4
            package:'std' version:'1.0.0'

            field_name:fold_version
            type:u32
            size:4 align:4

            field_name:name
            type:RStr<'a>
            size:16 align:8
        accessible_fields:
            [Yes, Yes, Yes]

Layout of found type:
    --- Type Layout ---
    type:PluginRoot
    size:24 align:8
    package:'test-plugin-layout-mismatch' version:'0.1.0'
    data:
        Prefix type:
        fields:
            field_name:abi_version
            type:u64
            size:8 align:8

            field_name:name
            type:RStr<'a>
            size:16 align:8
        accessible_fields:
            [Yes, Yes]

Error:mismatched package
Expected:
    host-api
Found:
    test-plugin-layout-mismatch
";

    #[test]
    fn names_the_type_its_sizes_the_first_differing_field_and_the_final_error() {
        let s = summarize(REPORT);
        assert!(
            s.contains("type PluginRoot is size 48 align 8 here (host-api 0.1.0) but size 24 align 8 in the library (test-plugin-layout-mismatch 0.1.0)"),
            "{s}"
        );
        assert!(
            s.contains("field 0 differs: `abi_version: u32` here, `abi_version: u64` in the library (3 fields here, 2 there)"),
            "{s}"
        );
        assert!(
            s.contains("mismatched package: expected host-api, found test-plugin-layout-mismatch"),
            "{s}"
        );
        assert!(!s.contains('\n'));
    }

    #[test]
    fn a_missing_trailing_field_is_named() {
        let expected = Side {
            type_name: "T".into(),
            fields: vec![("a".into(), "u8".into()), ("b".into(), "u8".into())],
            ..Side::default()
        };
        let found = Side {
            type_name: "T".into(),
            fields: vec![("a".into(), "u8".into())],
            ..Side::default()
        };
        assert_eq!(
            first_field_difference(&expected, &found).unwrap(),
            "field 1 differs: `b: u8` here, nothing in the library (2 fields here, 1 there)"
        );
        assert_eq!(first_field_difference(&expected, &expected), None);
    }

    #[test]
    fn an_unknown_report_keeps_its_last_lines_and_stays_short() {
        let text = (0..50)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            summarize(&text),
            "line 44 | line 45 | line 46 | line 47 | line 48 | line 49"
        );
        let long = "x".repeat(5_000);
        assert!(summarize(&long).chars().count() <= MAX_SUMMARY);
    }
}
