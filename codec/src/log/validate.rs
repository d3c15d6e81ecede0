//! Logical checks of single events (spec §1.7 steps 2, 4, 5 and the `request/header` rule of step 7).
//!
//! Each function looks at one event and either passes it or names the rule it breaks. The reader
//! ([`super::read`]) calls them per event in DSH's step order: [`check_obsolete`] before the legacy
//! upgrades ([`super::legacy`]), [`check_message_shape`] and [`check_known_type`] after them, and
//! [`check_request_header`] once the envelope is an [`Event`]. The surface rules are the fold's, not these.

use serde_json::{Map, Value};

use super::error::{clip_for_message, LogError, LogErrorCode};
use super::event::{is_known_type, Event};
use super::legacy;
use crate::json::safe_uint;

fn kind_of(event: &Value) -> Option<&str> {
    event.get("type")?.as_str()
}

fn with_seq(err: LogError, event: &Value) -> LogError {
    match event.get("seq").and_then(safe_uint) {
        Some(seq) => err.at_seq(seq),
        None => err,
    }
}

/// Whether an event of type `kind` passes steps 2–5 untouched whatever it holds: a known type that is
/// neither `request/header` (step 2) nor one the legacy upgrades (step 3) or message shapes (step 4) look
/// at. The reader skips those steps for such events.
pub fn is_plain_known(kind: &str) -> bool {
    // Chunks are most of a log: answer them without the search.
    kind == "assistant/chunk"
        || is_known_type(kind) && kind != "request/header" && !legacy::concerns(kind)
}

/// Step 2: vocabulary DSH retired and refuses to read (`request/header-delta`, `mode/set`, and a
/// `request/header` whose reason is `fallback`).
pub fn check_obsolete(event: &Value) -> Result<(), LogError> {
    let why = match kind_of(event) {
        Some(kind @ ("request/header-delta" | "mode/set")) => format!("obsolete event type {kind}"),
        Some("request/header")
            if event
                .get("data")
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str)
                == Some("fallback") =>
        {
            "obsolete request/header with reason \"fallback\"".to_owned()
        }
        _ => return Ok(()),
    };
    Err(with_seq(
        LogError::new(LogErrorCode::ObsoleteVocabulary, why),
        event,
    ))
}

fn non_empty_str(value: Option<&Value>) -> bool {
    value.and_then(Value::as_str).is_some_and(|s| !s.is_empty())
}

/// Step 4: the message shape of `user/message`, `assistant/message` and `tool/result` (DSH's
/// `assertMessageEventShape`). Other types pass.
pub fn check_message_shape(event: &Value) -> Result<(), LogError> {
    let Some(kind) = kind_of(event) else {
        return Ok(());
    };
    let data = event.get("data");
    let (message, role) = match kind {
        "user/message" => (data, "user"),
        "assistant/message" => (data.and_then(|d| d.get("message")), "assistant"),
        "tool/result" => (data.and_then(|d| d.get("message")), "user"),
        _ => return Ok(()),
    };
    message_rule(kind, message, role).map_err(|why| {
        with_seq(
            LogError::new(
                LogErrorCode::InvalidMessage,
                format!("invalid {kind} message: {why}"),
            ),
            event,
        )
    })
}

fn message_rule(kind: &str, message: Option<&Value>, role: &str) -> Result<(), String> {
    let Some(Value::Object(message)) = message else {
        return Err("message is not an object".into());
    };
    if !non_empty_str(message.get("id")) {
        return Err("id is not a non-empty string".into());
    }
    if message.get("role").and_then(Value::as_str) != Some(role) {
        return Err(format!("role is not {:?}", clip_for_message(role)));
    }
    let Some(Value::Object(source)) = message.get("source") else {
        return Err("source is not an object".into());
    };
    if !non_empty_str(source.get("kind")) {
        return Err("source.kind is not a non-empty string".into());
    }
    let Some(Value::Array(content)) = message.get("content") else {
        return Err("content is not an array".into());
    };
    match kind {
        "assistant/message" => assistant_source(source),
        "tool/result" => tool_result(source, content),
        _ => Ok(()),
    }
}

fn assistant_source(source: &Map<String, Value>) -> Result<(), String> {
    if source.get("kind").and_then(Value::as_str) != Some("model") {
        return Err("source.kind is not \"model\"".into());
    }
    if !non_empty_str(source.get("provider")) || !non_empty_str(source.get("model")) {
        return Err("source.provider and source.model must be non-empty strings".into());
    }
    Ok(())
}

fn tool_result(source: &Map<String, Value>, content: &[Value]) -> Result<(), String> {
    if source.get("kind").and_then(Value::as_str) != Some("tool") {
        return Err("source.kind is not \"tool\"".into());
    }
    let Some(call_id) = source
        .get("callId")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    else {
        return Err("source.callId is not a non-empty string".into());
    };
    let [Value::Object(block)] = content else {
        return Err("content must hold exactly one tool-result block".into());
    };
    if block.get("type").and_then(Value::as_str) != Some("tool-result") {
        return Err("content[0].type is not \"tool-result\"".into());
    }
    if !block.get("content").is_some_and(Value::is_array) {
        return Err("content[0].content is not an array".into());
    }
    if block.get("toolCallId").and_then(Value::as_str) != Some(call_id) {
        return Err("content[0].toolCallId differs from source.callId".into());
    }
    Ok(())
}

/// Step 5: a type outside DSH's known set is a refusal unless the event carries `ignorable: true`.
pub fn check_known_type(event: &Value) -> Result<(), LogError> {
    let kind = kind_of(event);
    if kind.is_some_and(is_known_type) || event.get("ignorable") == Some(&Value::Bool(true)) {
        return Ok(());
    }
    let shown = kind.map_or_else(
        || event.get("type").map_or("(none)".into(), Value::to_string),
        str::to_owned,
    );
    let err = LogError::new(
        LogErrorCode::UnknownEventType,
        format!(
            "event type {} is unknown to this harness and not marked ignorable",
            clip_for_message(&shown)
        ),
    );
    Err(with_seq(err, event))
}

/// Step 7, `request/header`: `header.config.provider`/`model` non-empty strings, `reasoningEffort` (if
/// present) a non-empty string, and `adapterDefaults` (if present) an object whose keys are among
/// `reasoningEffort`/`maxTokens`, each `true` and each present in `config`. Other types pass.
pub fn check_request_header(event: &Event) -> Result<(), LogError> {
    if event.kind != "request/header" {
        return Ok(());
    }
    request_header_rule(&event.data).map_err(|why| {
        LogError::new(
            LogErrorCode::InvalidRequestHeader,
            format!("invalid request/header: {why}"),
        )
        .at_seq(event.seq)
    })
}

fn request_header_rule(data: &Value) -> Result<(), String> {
    let Some(Value::Object(header)) = data.get("header") else {
        return Err("header is not an object".into());
    };
    let Some(Value::Object(config)) = header.get("config") else {
        return Err("header.config is not an object".into());
    };
    if !non_empty_str(config.get("provider")) || !non_empty_str(config.get("model")) {
        return Err("config.provider and config.model must be non-empty strings".into());
    }
    if config
        .get("reasoningEffort")
        .is_some_and(|v| !non_empty_str(Some(v)))
    {
        return Err("config.reasoningEffort is not a non-empty string".into());
    }
    match header.get("adapterDefaults") {
        None => Ok(()),
        Some(Value::Object(defaults)) => {
            for (key, value) in defaults {
                if key != "reasoningEffort" && key != "maxTokens" {
                    return Err(format!(
                        "adapterDefaults has unexpected key {:?}",
                        clip_for_message(key)
                    ));
                }
                if value != &Value::Bool(true) {
                    return Err(format!("adapterDefaults.{key} is not true"));
                }
                if !config.contains_key(key) {
                    return Err(format!(
                        "adapterDefaults marks {key} but config has no {key}"
                    ));
                }
            }
            Ok(())
        }
        Some(_) => Err("adapterDefaults is not an object".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(r: Result<(), LogError>) -> Option<LogErrorCode> {
        r.err().map(|e| e.code)
    }

    #[test]
    fn plain_types_are_those_no_step_looks_at() {
        for kind in [
            "assistant/chunk",
            "step/start",
            "session/title",
            "tool/call",
        ] {
            assert!(is_plain_known(kind), "{kind}");
        }
        for kind in [
            "request/header",
            "turn/start",
            "turn/end",
            "user/message",
            "assistant/message",
            "tool/result",
            "steering/message",
            "mode/set",
            "request/header-delta",
            "future/x",
        ] {
            assert!(!is_plain_known(kind), "{kind}");
        }
    }

    #[test]
    fn obsolete_vocabulary_is_refused() {
        for e in [
            json!({"type":"request/header-delta","seq":3,"data":{}}),
            json!({"type":"mode/set","seq":3,"data":{}}),
            json!({"type":"request/header","seq":3,"data":{"reason":"fallback"}}),
        ] {
            let err = check_obsolete(&e).unwrap_err();
            assert_eq!(
                (err.code, err.seq),
                (LogErrorCode::ObsoleteVocabulary, Some(3))
            );
        }
        assert!(
            check_obsolete(&json!({"type":"request/header","data":{"reason":"initial"}})).is_ok()
        );
    }

    #[test]
    fn message_shapes() {
        let user = json!({"type":"user/message","seq":0,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}}});
        assert!(check_message_shape(&user).is_ok());
        let assistant = json!({"type":"assistant/message","data":{"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}}});
        assert!(check_message_shape(&assistant).is_ok());
        let tool = json!({"type":"tool/result","data":{"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"tool","callId":"c"}}}});
        assert!(check_message_shape(&tool).is_ok());

        let broken = |base: &Value, path: &[&str], value: Value| {
            let mut v = base.clone();
            let mut at = &mut v;
            for key in &path[..path.len() - 1] {
                at = if let Ok(i) = key.parse::<usize>() {
                    &mut at[i]
                } else {
                    &mut at[*key]
                };
            }
            match value {
                Value::Null => {
                    at.as_object_mut().unwrap().remove(path[path.len() - 1]);
                }
                v => at[path[path.len() - 1]] = v,
            }
            code(check_message_shape(&v))
        };
        let invalid = Some(LogErrorCode::InvalidMessage);
        assert_eq!(broken(&user, &["data", "id"], json!("")), invalid);
        assert_eq!(
            broken(&user, &["data", "role"], json!("assistant")),
            invalid
        );
        assert_eq!(broken(&user, &["data", "source"], json!("user")), invalid);
        assert_eq!(
            broken(&user, &["data", "source", "kind"], json!("")),
            invalid
        );
        assert_eq!(broken(&user, &["data", "content"], json!("text")), invalid);
        assert_eq!(broken(&user, &["data"], json!([])), invalid);
        let m = ["data", "message"];
        assert_eq!(
            broken(&assistant, &[m[0], m[1], "source", "kind"], json!("user")),
            invalid
        );
        assert_eq!(
            broken(&assistant, &[m[0], m[1], "source", "model"], json!("")),
            invalid
        );
        assert_eq!(
            broken(&assistant, &[m[0], m[1], "source", "provider"], Value::Null),
            invalid
        );
        assert_eq!(
            broken(&assistant, &[m[0], m[1], "role"], json!("user")),
            invalid
        );
        assert_eq!(broken(&assistant, &m, Value::Null), invalid);
        assert_eq!(
            broken(&tool, &[m[0], m[1], "source", "kind"], json!("user")),
            invalid
        );
        assert_eq!(
            broken(&tool, &[m[0], m[1], "source", "callId"], json!("")),
            invalid
        );
        assert_eq!(broken(&tool, &[m[0], m[1], "content"], json!([])), invalid);
        assert_eq!(
            broken(&tool, &[m[0], m[1], "content", "0", "type"], json!("text")),
            invalid
        );
        assert_eq!(
            broken(&tool, &[m[0], m[1], "content", "0", "content"], json!("x")),
            invalid
        );
        assert_eq!(
            broken(
                &tool,
                &[m[0], m[1], "content", "0", "toolCallId"],
                json!("d")
            ),
            invalid
        );
        let two = json!([{"type":"tool-result","toolCallId":"c","content":[]},{"type":"tool-result","toolCallId":"c","content":[]}]);
        assert_eq!(broken(&tool, &[m[0], m[1], "content"], two), invalid);
    }

    #[test]
    fn unknown_types_need_ignorable_true() {
        assert!(check_known_type(&json!({"type":"turn/end"})).is_ok());
        assert!(check_known_type(&json!({"type":"future/thing","ignorable":true})).is_ok());
        let err = check_known_type(&json!({"type":"future/thing","seq":4})).unwrap_err();
        assert_eq!(
            (err.code, err.seq),
            (LogErrorCode::UnknownEventType, Some(4))
        );
        assert!(err.message.contains("future/thing"));
        assert_eq!(
            code(check_known_type(&json!({"type":5}))),
            Some(LogErrorCode::UnknownEventType)
        );
    }

    #[test]
    fn request_header_config_rules() {
        let rh = |header: Value| {
            code(check_request_header(&Event::new(
                "request/header",
                0,
                0,
                json!({"header":header,"reason":"initial"}),
            )))
        };
        let bad = Some(LogErrorCode::InvalidRequestHeader);
        assert_eq!(rh(json!({"config":{"provider":"p","model":"m"}})), None);
        assert_eq!(
            rh(
                json!({"config":{"provider":"p","model":"m","reasoningEffort":"high","maxTokens":5},"adapterDefaults":{"reasoningEffort":true,"maxTokens":true}})
            ),
            None
        );
        assert_eq!(rh(json!({"config":{"provider":"","model":"m"}})), bad);
        assert_eq!(rh(json!({"config":{"provider":"p"}})), bad);
        assert_eq!(
            rh(json!({"config":{"provider":"p","model":"m","reasoningEffort":""}})),
            bad
        );
        assert_eq!(
            rh(json!({"config":{"provider":"p","model":"m"},"adapterDefaults":[]})),
            bad
        );
        assert_eq!(
            rh(json!({"config":{"provider":"p","model":"m"},"adapterDefaults":{"maxTokens":true}})),
            bad
        );
        assert_eq!(
            rh(json!({"config":{"provider":"p","model":"m","x":1},"adapterDefaults":{"x":true}})),
            bad
        );
        assert_eq!(
            rh(
                json!({"config":{"provider":"p","model":"m","maxTokens":1},"adapterDefaults":{"maxTokens":false}})
            ),
            bad
        );
        assert_eq!(rh(json!("config")), bad);
        assert!(check_request_header(&Event::new("request/context", 0, 0, json!(null))).is_ok());
    }
}
