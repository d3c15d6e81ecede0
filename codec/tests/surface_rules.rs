//! One test (or more) per rule and per failure of the surface fold (spec §2), with the exact error
//! wording, plus labels, replacement chains and the derived views.

use dsh_codec::log::{Event, LogError, LogErrorCode};
use dsh_codec::surface::{
    current_surface, human_transcript, model_messages, Applied, FoldError, Label, Replacement,
    SurfaceFold,
};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------------
// Builders

fn user(seq: u64, text: &str) -> Event {
    Event::appended(
        "user/message",
        seq,
        1_000 + seq as i64,
        json!({"content":[{"type":"text","text":text}],"source":{"kind":"user"},"role":"user","id":format!("u{seq}")}),
    )
}

fn assistant(seq: u64, text: &str) -> Event {
    let content = if text.is_empty() {
        json!([])
    } else {
        json!([{"type":"text","text":text}])
    };
    Event::appended(
        "assistant/message",
        seq,
        1_000 + seq as i64,
        json!({"turn":1,"step":1,"message":{"role":"assistant","content":content,
            "source":{"kind":"model","provider":"p","model":"m"},"id":format!("a{seq}")}}),
    )
}

fn tool_data(call: &str, output: &str) -> Value {
    json!({"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":call},
        "content":[{"type":"tool-result","toolCallId":call,"content":[{"type":"text","text":output}],"isError":false}],
        "role":"user","id":format!("t-{call}")}})
}

fn tool_result(seq: u64, call: &str, output: &str) -> Event {
    Event::appended(
        "tool/result",
        seq,
        1_000 + seq as i64,
        tool_data(call, output),
    )
}

fn log_only(seq: u64, kind: &str) -> Event {
    Event::new(kind, seq, 1_000 + seq as i64, json!({"turn":1}))
}

fn replacing(mut event: Event, start: u64, end: u64, sources: Value) -> Event {
    event.surface_op = Some(json!({"op":"replace","start":start,"end":end}));
    event.source_event_seqs = Some(sources);
    event
}

fn with_sources(mut event: Event, sources: Value) -> Event {
    event.source_event_seqs = Some(sources);
    event
}

fn with_op(mut event: Event, op: Option<Value>) -> Event {
    event.surface_op = op;
    event
}

fn fold_ok(events: &[Event]) -> SurfaceFold {
    match SurfaceFold::fold(events) {
        Ok(fold) => fold,
        Err(err) => panic!("expected the log to fold: {err}"),
    }
}

/// Folds `prefix` (which must be valid), then applies `bad` and expects exactly `message`, with the
/// state unchanged.
fn rejects(prefix: &[Event], bad: Event, message: &str) {
    let mut fold = fold_ok(prefix);
    let before = fold.clone();
    let err = fold.apply(&bad).expect_err("the event should be rejected");
    assert_eq!(err.message, message);
    assert_eq!(err.seq, bad.seq);
    assert_eq!(
        err.to_string(),
        format!("invalid session surface: {message}")
    );
    assert_eq!(
        fold, before,
        "a rejected event must leave the state unchanged"
    );
    let mut batch = prefix.to_vec();
    batch.push(bad);
    assert_eq!(
        SurfaceFold::fold(&batch).expect_err("batch fold agrees"),
        err
    );
}

fn labels(fold: &SurfaceFold) -> Vec<&'static str> {
    fold.labels().iter().map(|l| l.as_str()).collect()
}

// ---------------------------------------------------------------------------------------------------
// Step 1: contiguity

#[test]
fn seq_must_be_contiguous_from_zero() {
    rejects(
        &[],
        user(1, "hi"),
        "session event seq 1 is not contiguous; expected 0",
    );
    let prefix = [user(0, "a"), assistant(1, "b")];
    rejects(
        &prefix,
        user(1, "dup"),
        "session event seq 1 is not contiguous; expected 2",
    );
    rejects(
        &prefix,
        log_only(5, "turn/end"),
        "session event seq 5 is not contiguous; expected 2",
    );
}

// ---------------------------------------------------------------------------------------------------
// Step 2: eligibility and surfaceOp syntax

#[test]
fn log_only_types_cannot_carry_surface_markers() {
    let prefix = [user(0, "a")];
    let msg = "session event \"tool/call\" is not surface-eligible and cannot carry surfaceOp";
    rejects(
        &prefix,
        with_op(log_only(1, "tool/call"), Some(json!("append"))),
        msg,
    );
    // Present means present: JSON null is not "absent".
    rejects(
        &prefix,
        with_op(log_only(1, "tool/call"), Some(Value::Null)),
        msg,
    );
    rejects(
        &prefix,
        with_sources(log_only(1, "compaction/summary"), json!([0])),
        "session event \"compaction/summary\" is not surface-eligible and cannot carry sourceEventSeqs",
    );
    // surfaceOp is checked before sourceEventSeqs.
    let both = with_sources(
        with_op(log_only(1, "x/y"), Some(json!("append"))),
        json!([0]),
    );
    rejects(
        &prefix,
        both,
        "session event \"x/y\" is not surface-eligible and cannot carry surfaceOp",
    );
}

#[test]
fn message_types_require_a_surface_op() {
    for (event, kind) in [
        (user(0, "a"), "user/message"),
        (assistant(0, "a"), "assistant/message"),
        (tool_result(0, "c", "o"), "tool/result"),
    ] {
        rejects(
            &[],
            with_op(event, None),
            &format!(
                "session event \"{kind}\" is surface-eligible and requires a surfaceOp marker"
            ),
        );
    }
}

#[test]
fn surface_op_must_be_the_exact_append_string_or_an_object() {
    for op in [
        json!("Append"),
        json!("append "),
        json!(""),
        Value::Null,
        json!(["append"]),
        json!(1),
        json!(true),
    ] {
        rejects(
            &[],
            with_op(user(0, "a"), Some(op.clone())),
            "session event \"user/message\" carries an invalid surfaceOp",
        );
    }
}

#[test]
fn replace_op_must_have_exactly_op_start_end() {
    let prefix = [user(0, "a")];
    let msg = "session event \"user/message\" carries an invalid replace surfaceOp";
    for op in [
        json!({}),
        json!({"op":"replace","start":0}),
        json!({"op":"replace","start":0,"end":0,"extra":1}),
        json!({"op":"Replace","start":0,"end":0}),
        json!({"op":"append","start":0,"end":0}),
        json!({"op":null,"start":0,"end":0}),
        json!({"op":"replace","start":-1,"end":0}),
        json!({"op":"replace","start":0,"end":0.5}),
        json!({"op":"replace","start":"0","end":0}),
        json!({"op":"replace","start":0,"end":9007199254740992u64}),
        json!({"op":"replace","start":0,"end":null}),
        json!({"op":"replace","begin":0,"end":0}),
    ] {
        rejects(
            &prefix,
            with_sources(with_op(user(1, "b"), Some(op.clone())), json!([0])),
            msg,
        );
    }
}

#[test]
fn replace_bounds_are_integers_by_value() {
    // JavaScript reads 0.0 as the integer 0.
    let bounds: Value = serde_json::from_str(r#"{"op":"replace","start":0.0,"end":0e0}"#).unwrap();
    let event = with_sources(with_op(user(1, "b"), Some(bounds)), json!([0.0]));
    let fold = fold_ok(&[user(0, "a"), event]);
    assert_eq!(fold.nodes(), &[1]);
    assert_eq!(
        fold.replacements(),
        &[Replacement {
            seq: 1,
            start: 0,
            end: 0,
            shadowed: vec![0]
        }]
    );
}

// ---------------------------------------------------------------------------------------------------
// Step 3: append

#[test]
fn appends_join_the_surface_in_log_order() {
    let mut fold = SurfaceFold::new();
    assert_eq!(
        fold.apply(&log_only(0, "turn/start")).unwrap(),
        Applied::LogOnly
    );
    assert_eq!(fold.apply(&user(1, "a")).unwrap(), Applied::Appended);
    assert_eq!(fold.apply(&assistant(2, "b")).unwrap(), Applied::Appended);
    assert_eq!(
        fold.apply(&tool_result(3, "c", "o")).unwrap(),
        Applied::Appended
    );
    assert_eq!(fold.folded(), 4);
    assert_eq!(fold.nodes(), &[1, 2, 3]);
    assert!(fold.replacements().is_empty());
    assert_eq!(labels(&fold), ["log-only", "current", "current", "current"]);
    assert_eq!(fold.label(3), Some(Label::Current));
    assert_eq!(fold.label(4), None);
    assert_eq!(fold.label(u64::MAX), None);
}

// ---------------------------------------------------------------------------------------------------
// Step 5: provenance (both paths)

#[test]
fn provenance_must_be_an_array() {
    for bad in [json!(0), json!("0"), Value::Null, json!({"0":0})] {
        rejects(
            &[user(0, "a")],
            with_sources(assistant(1, "b"), bad.clone()),
            "sourceEventSeqs on event at seq 1 must be an array when present",
        );
    }
}

#[test]
fn empty_provenance_only_on_assistant_messages() {
    let prefix = [user(0, "a")];
    let msg = "sourceEventSeqs must not be empty except on assistant/message";
    rejects(&prefix, with_sources(user(1, "b"), json!([])), msg);
    rejects(
        &prefix,
        with_sources(tool_result(1, "c", "o"), json!([])),
        msg,
    );
    let fold = fold_ok(&[user(0, "a"), with_sources(assistant(1, "b"), json!([]))]);
    assert_eq!(fold.nodes(), &[0, 1]);
}

#[test]
fn provenance_elements_must_be_seqs() {
    let prefix = [user(0, "a"), log_only(1, "tool/call")];
    for bad in [
        json!([-1]),
        json!([0.5]),
        json!(["0"]),
        json!([null]),
        json!([0, [1]]),
        json!([9007199254740992u64]),
    ] {
        rejects(
            &prefix,
            with_sources(tool_result(2, "c", "o"), bad.clone()),
            "session event \"tool/result\" sourceEventSeqs must densely contain non-negative safe integers",
        );
    }
}

#[test]
fn provenance_must_not_repeat() {
    let prefix = [user(0, "a"), log_only(1, "tool/call")];
    rejects(
        &prefix,
        with_sources(tool_result(2, "c", "o"), json!([1, 1])),
        "sourceEventSeqs must not contain duplicates",
    );
    rejects(
        &prefix,
        with_sources(tool_result(2, "c", "o"), json!([1, 0, 1])),
        "sourceEventSeqs must not contain duplicates",
    );
    // 1 and 1.0 are the same number.
    let dup: Value = serde_json::from_str("[1, 1.0]").unwrap();
    rejects(
        &prefix,
        with_sources(tool_result(2, "c", "o"), dup),
        "sourceEventSeqs must not contain duplicates",
    );
}

#[test]
fn provenance_must_point_backwards_and_names_the_first_late_element() {
    let prefix = [user(0, "a"), log_only(1, "tool/call")];
    rejects(
        &prefix,
        with_sources(tool_result(2, "c", "o"), json!([2])),
        "sourceEventSeqs must reference earlier events: 2 >= current seq 2",
    );
    rejects(
        &prefix,
        with_sources(tool_result(2, "c", "o"), json!([0, 7, 3])),
        "sourceEventSeqs must reference earlier events: 7 >= current seq 2",
    );
}

#[test]
fn provenance_checks_run_in_order() {
    let prefix = [user(0, "a"), log_only(1, "tool/call")];
    // A bad element anywhere beats a duplicate and a late seq.
    rejects(
        &prefix,
        with_sources(tool_result(2, "c", "o"), json!([5, 1, 1, "x"])),
        "session event \"tool/result\" sourceEventSeqs must densely contain non-negative safe integers",
    );
    // A duplicate beats a late seq that comes first.
    rejects(
        &prefix,
        with_sources(tool_result(2, "c", "o"), json!([5, 1, 1])),
        "sourceEventSeqs must not contain duplicates",
    );
}

#[test]
fn provenance_may_cite_any_earlier_event() {
    // Log-only events, shadowed events and unordered lists are all fine.
    let events = [
        user(0, "a"),
        log_only(1, "compaction/start"),
        replacing(user(2, "summary"), 0, 0, json!([1, 0])),
        with_sources(assistant(3, "b"), json!([2, 0, 1])),
    ];
    let fold = fold_ok(&events);
    assert_eq!(fold.nodes(), &[2, 3]);
}

// ---------------------------------------------------------------------------------------------------
// Step 4: replace

#[test]
fn replace_start_and_end_must_be_on_the_surface() {
    let prefix = [
        user(0, "a"),
        log_only(1, "turn/end"),
        assistant(2, "b"),
        replacing(user(3, "s"), 0, 0, json!([0])),
    ];
    // Log-only, shadowed, the event itself and the future are all "not found".
    for (start, end, msg) in [
        (1, 2, "surface replace: start seq 1 not found in surface"),
        (0, 2, "surface replace: start seq 0 not found in surface"),
        (4, 4, "surface replace: start seq 4 not found in surface"),
        (99, 2, "surface replace: start seq 99 not found in surface"),
        (2, 1, "surface replace: end seq 1 not found in surface"),
        (2, 0, "surface replace: end seq 0 not found in surface"),
        (3, 4, "surface replace: end seq 4 not found in surface"),
    ] {
        rejects(
            &prefix,
            replacing(user(4, "x"), start, end, json!([0, 1, 2, 3])),
            msg,
        );
    }
    // Start is looked up first.
    rejects(
        &prefix,
        replacing(user(4, "x"), 7, 8, json!([])),
        "surface replace: start seq 7 not found in surface",
    );
}

#[test]
fn replace_range_follows_surface_positions() {
    let prefix = [user(0, "a"), assistant(1, "b"), user(2, "c")];
    rejects(
        &prefix,
        replacing(user(3, "x"), 2, 0, json!([0, 1, 2])),
        "surface replace: start seq 2 (index 2) is after end seq 0 (index 0)",
    );
    // After replacing [1] by 3 the surface is [0, 3, 2]: start 3 > end 2 numerically, yet 3 comes first.
    let mut events = prefix.to_vec();
    events.push(replacing(assistant(3, "b'"), 1, 1, json!([1])));
    events.push(replacing(user(4, "summary"), 3, 2, json!([3, 2])));
    let fold = fold_ok(&events);
    assert_eq!(fold.nodes(), &[0, 4]);
    assert_eq!(
        fold.replacements()[1],
        Replacement {
            seq: 4,
            start: 3,
            end: 2,
            shadowed: vec![3, 2]
        }
    );
    // And the numerically ordered range is now backwards on the surface.
    let mut events = prefix.to_vec();
    events.push(replacing(assistant(3, "b'"), 1, 1, json!([1])));
    rejects(
        &events,
        replacing(user(4, "x"), 2, 3, json!([2, 3])),
        "surface replace: start seq 2 (index 2) is after end seq 3 (index 1)",
    );
}

#[test]
fn replace_shadows_everything_between_inclusive() {
    let events = [
        user(0, "a"),
        assistant(1, "b"),
        log_only(2, "tool/call"),
        tool_result(3, "c", "o"),
        assistant(4, "d"),
        log_only(5, "compaction/start"),
        replacing(user(6, "summary"), 1, 3, json!([5, 1, 3])),
    ];
    let mut fold = fold_ok(&events[..6]);
    assert_eq!(
        fold.apply(&events[6]).unwrap(),
        Applied::Replaced {
            shadowed: vec![1, 3]
        }
    );
    assert_eq!(fold.nodes(), &[0, 6, 4]);
    assert_eq!(
        labels(&fold),
        ["current", "shadowed", "log-only", "shadowed", "current", "log-only", "current"]
    );
    assert_eq!(
        fold.replacement(6),
        Some(&Replacement {
            seq: 6,
            start: 1,
            end: 3,
            shadowed: vec![1, 3]
        })
    );
    assert_eq!(fold.replacement(4), None);
}

#[test]
fn replace_requires_provenance_for_every_shadowed_node() {
    let prefix = [user(0, "a"), assistant(1, "b"), user(2, "c")];
    let mut absent = replacing(user(3, "s"), 0, 2, json!([]));
    absent.source_event_seqs = None;
    rejects(
        &prefix,
        absent,
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing 0, 1, 2",
    );
    rejects(
        &prefix,
        replacing(user(3, "s"), 0, 2, json!([2, 0])),
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing 1",
    );
    // An assistant replacement with an empty list passes the provenance syntax but still misses nodes.
    rejects(
        &prefix,
        replacing(assistant(3, "s"), 1, 1, json!([])),
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing 1",
    );
}

#[test]
fn compaction_as_dsh_writes_it() {
    // The shape of examples/headless-agent compaction-recovery: sources [start marker, summary, shadowed].
    let events = [
        log_only(0, "turn/start"),
        user(1, "Establish a durable compaction premise"),
        assistant(2, "ok"),
        log_only(3, "compaction/start"),
        log_only(4, "compaction/summary"),
        replacing(user(5, "checkpoint"), 1, 2, json!([3, 4, 1, 2])),
        log_only(6, "compaction/end"),
        assistant(7, "COMPACTION RECOVERED"),
        log_only(8, "turn/end"),
    ];
    let fold = fold_ok(&events);
    assert_eq!(fold.nodes(), &[5, 7]);
    assert_eq!(
        labels(&fold),
        [
            "log-only", "shadowed", "shadowed", "log-only", "log-only", "current", "log-only",
            "current", "log-only"
        ]
    );
    assert_eq!(fold.replaced_by(1), Some(5));
    assert_eq!(fold.replaced_by(5), None);
}

// ---------------------------------------------------------------------------------------------------
// The tool/result content-only rule

fn pruned(seq: u64, target: u64, data: Value) -> Event {
    replacing(
        Event::appended("tool/result", seq, 0, data),
        target,
        target,
        json!([seq - 1, target]),
    )
}

fn tool_prefix() -> Vec<Event> {
    vec![
        user(0, "run it"),
        assistant(1, "calling"),
        log_only(2, "tool/call"),
        tool_result(3, "c1", "a very long tool output"),
        log_only(4, "compaction/prune"),
    ]
}

#[test]
fn tool_result_may_rewrite_only_its_output() {
    let mut events = tool_prefix();
    events.push(pruned(5, 3, tool_data("c1", "[pruned]")));
    let fold = fold_ok(&events);
    assert_eq!(fold.nodes(), &[0, 1, 5]);
    assert_eq!(fold.label(3), Some(Label::Shadowed));

    // Key order and number spelling do not matter; the output may become anything, even absent.
    let mut reordered: Value = serde_json::from_str(
        r#"{"step":1.0,"message":{"id":"t-c1","role":"user","content":[{"isError":false,"toolCallId":"c1","type":"tool-result","content":{"any":"thing"}}],"source":{"callId":"c1","kind":"tool"}},"turn":1}"#,
    )
    .unwrap();
    let mut events = tool_prefix();
    events.push(pruned(5, 3, reordered.clone()));
    fold_ok(&events);
    reordered["message"]["content"][0]
        .as_object_mut()
        .unwrap()
        .remove("content");
    let mut events = tool_prefix();
    events.push(pruned(5, 3, reordered));
    fold_ok(&events);
}

/// A named edit of a tool result's data.
type Edit = (&'static str, Box<dyn Fn(&mut Value)>);

#[test]
fn tool_result_rewrite_forbids_every_other_change() {
    let msg = "tool/result surface replacement may change only content";
    let original = tool_data("c1", "x");
    let mutations: Vec<Edit> = vec![
        ("turn", Box::new(|d| d["turn"] = json!(2))),
        ("step", Box::new(|d| d["step"] = json!(2))),
        (
            "add error",
            Box::new(|d| d["error"] = json!({"name":"E","code":"C"})),
        ),
        ("add meta", Box::new(|d| d["meta"] = json!({"pruned":true}))),
        (
            "drop turn",
            Box::new(|d| {
                d.as_object_mut().unwrap().remove("turn");
            }),
        ),
        (
            "message id",
            Box::new(|d| d["message"]["id"] = json!("other")),
        ),
        (
            "role",
            Box::new(|d| d["message"]["role"] = json!("assistant")),
        ),
        (
            "source kind",
            Box::new(|d| d["message"]["source"]["kind"] = json!("plugin")),
        ),
        (
            "source callId",
            Box::new(|d| d["message"]["source"]["callId"] = json!("c2")),
        ),
        (
            "toolCallId",
            Box::new(|d| d["message"]["content"][0]["toolCallId"] = json!("c2")),
        ),
        (
            "isError",
            Box::new(|d| d["message"]["content"][0]["isError"] = json!(true)),
        ),
        (
            "block type",
            Box::new(|d| d["message"]["content"][0]["type"] = json!("text")),
        ),
        (
            "drop isError",
            Box::new(|d| {
                d["message"]["content"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("isError");
            }),
        ),
        (
            "extra message key",
            Box::new(|d| d["message"]["extra"] = json!(1)),
        ),
        (
            "no message",
            Box::new(|d| {
                d.as_object_mut().unwrap().remove("message");
            }),
        ),
        (
            "content not an array",
            Box::new(|d| d["message"]["content"] = json!("text")),
        ),
    ];
    for (what, mutate) in mutations {
        let mut data = original.clone();
        mutate(&mut data);
        let mut prefix = tool_prefix();
        prefix[3] = Event::appended("tool/result", 3, 0, original.clone());
        let mut fold = fold_ok(&prefix);
        let before = fold.clone();
        let err = fold.apply(&pruned(5, 3, data)).expect_err(what);
        assert_eq!(err.message, msg, "{what}");
        assert_eq!(fold, before, "{what}");
    }
}

#[test]
fn tool_result_rewrite_compares_only_the_first_block() {
    // The rule reduces content to `[{...content[0], content: null}]`; a second block is not compared.
    let mut original = tool_data("c1", "x");
    original["message"]["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type":"text","text":"second"}));
    let mut replacement = tool_data("c1", "y");
    replacement["message"]["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type":"text","text":"changed"}));
    let mut events = tool_prefix();
    events[3] = Event::appended("tool/result", 3, 0, original);
    events.push(pruned(5, 3, replacement));
    fold_ok(&events);
}

#[test]
fn tool_result_rewrite_must_target_exactly_one_tool_result() {
    let prefix = [
        user(0, "a"),
        tool_result(1, "c1", "x"),
        tool_result(2, "c2", "y"),
        log_only(3, "compaction/prune"),
    ];
    rejects(
        &prefix,
        replacing(tool_result(4, "c1", "z"), 1, 2, json!([1, 2])),
        "tool/result surface replacement must rewrite exactly one current node",
    );
    rejects(
        &prefix,
        replacing(tool_result(4, "c1", "z"), 0, 0, json!([0])),
        "tool/result surface replacement must target a current tool/result",
    );
    // Provenance is checked before the tool-result rule.
    rejects(
        &prefix,
        replacing(tool_result(4, "c1", "z"), 0, 1, json!([0])),
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing 1",
    );
    // Other message types may shadow tool results freely (compaction).
    let mut events = prefix.to_vec();
    events.push(replacing(user(4, "summary"), 1, 2, json!([3, 1, 2])));
    assert_eq!(fold_ok(&events).nodes(), &[0, 4]);
}

#[test]
fn a_pruned_result_can_be_pruned_again_against_the_current_node() {
    let mut events = tool_prefix();
    events.push(pruned(5, 3, tool_data("c1", "[pruned once]")));
    events.push(log_only(6, "compaction/prune"));
    events.push(pruned(7, 5, tool_data("c1", "[pruned twice]")));
    let fold = fold_ok(&events);
    assert_eq!(fold.nodes(), &[0, 1, 7]);
    assert_eq!(fold.replacement_chain(3), vec![5, 7]);
    assert_eq!(fold.replacement_chain(5), vec![7]);
    assert!(fold.replacement_chain(7).is_empty());
    // The original is no longer on the surface, so it cannot be pruned directly.
    let mut prefix = events.clone();
    prefix.push(log_only(8, "compaction/prune"));
    rejects(
        &prefix,
        pruned(9, 3, tool_data("c1", "late")),
        "surface replace: start seq 3 not found in surface",
    );
    // A re-prune that changes the id is rejected against the current node.
    let mut changed = tool_data("c1", "[pruned twice]");
    changed["message"]["id"] = json!("new-id");
    rejects(
        &prefix,
        pruned(9, 7, changed),
        "tool/result surface replacement may change only content",
    );
}

#[test]
fn a_tool_result_compaction_replacement_cannot_be_pruned_later() {
    // A user checkpoint replaced a tool result; a tool/result cannot replace that checkpoint.
    let prefix = [
        tool_result(0, "c1", "x"),
        log_only(1, "compaction/start"),
        replacing(user(2, "summary"), 0, 0, json!([1, 0])),
    ];
    rejects(
        &prefix,
        replacing(tool_result(3, "c1", "y"), 2, 2, json!([2])),
        "tool/result surface replacement must target a current tool/result",
    );
}

// ---------------------------------------------------------------------------------------------------
// §2.2 / §2.3: labels, nested and chained replacements

#[test]
fn replace_of_a_replacement() {
    let events = [
        user(0, "A"),
        assistant(1, "B"),
        log_only(2, "compaction/start"),
        replacing(user(3, "R1"), 0, 1, json!([2, 0, 1])),
        assistant(4, "C"),
        log_only(5, "compaction/start"),
        // R2 covers R1's position; it must cite R1 but not what R1 shadowed.
        replacing(user(6, "R2"), 3, 4, json!([5, 3, 4])),
        user(7, "D"),
    ];
    let fold = fold_ok(&events);
    assert_eq!(fold.nodes(), &[6, 7]);
    assert_eq!(
        labels(&fold),
        [
            "shadowed", "shadowed", "log-only", "shadowed", "shadowed", "log-only", "current",
            "current"
        ]
    );
    assert_eq!(fold.replaced_by(0), Some(3));
    assert_eq!(fold.replaced_by(3), Some(6));
    assert_eq!(fold.replacement_chain(0), vec![3, 6]);
    assert_eq!(fold.replacement_chain(4), vec![6]);
    assert_eq!(fold.replacement_chain(7), Vec::<u64>::new());
    // replacedEventSeqs(R2) is direct only.
    assert_eq!(
        fold.replacement(6).map(|r| r.shadowed.clone()),
        Some(vec![3, 4])
    );
    // Missing R1 in R2's sources fails even if R1's originals are listed.
    rejects(
        &events[..6],
        replacing(user(6, "R2"), 3, 4, json!([0, 1, 4])),
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing 3",
    );
}

#[test]
fn nested_and_chained_replacements() {
    // Surface: 0 1 2 3 4. R5 replaces [1..2] → 0 5 3 4. R6 replaces [3..3] → 0 5 6 4.
    // R7 replaces [5..6] (two replacements, nested) → 0 7 4. R8 replaces [0..4] → 8.
    let events = [
        user(0, "a"),
        assistant(1, "b"),
        user(2, "c"),
        assistant(3, "d"),
        user(4, "e"),
        replacing(user(5, "R5"), 1, 2, json!([1, 2])),
        replacing(assistant(6, "R6"), 3, 3, json!([3])),
        replacing(user(7, "R7"), 5, 6, json!([6, 5])),
        replacing(user(8, "R8"), 0, 4, json!([0, 7, 4])),
    ];
    let mut fold = SurfaceFold::new();
    let mut surfaces = Vec::new();
    for event in &events {
        fold.apply(event).unwrap();
        surfaces.push(fold.nodes().to_vec());
    }
    assert_eq!(surfaces[5], [0, 5, 3, 4]);
    assert_eq!(surfaces[6], [0, 5, 6, 4]);
    assert_eq!(surfaces[7], [0, 7, 4]);
    assert_eq!(surfaces[8], [8]);
    assert_eq!(
        labels(&fold),
        ["shadowed"; 8]
            .iter()
            .copied()
            .chain(["current"])
            .collect::<Vec<_>>()
    );
    assert_eq!(fold.replacement_chain(1), vec![5, 7, 8]);
    assert_eq!(fold.replacement_chain(3), vec![6, 7, 8]);
    assert_eq!(fold.replacement_chain(0), vec![8]);
    let shadowed: Vec<Vec<u64>> = fold
        .replacements()
        .iter()
        .map(|r| r.shadowed.clone())
        .collect();
    assert_eq!(shadowed, [vec![1, 2], vec![3], vec![5, 6], vec![0, 7, 4]]);
}

#[test]
fn empty_assistant_messages_are_current_but_not_model_messages() {
    let events = [
        user(0, "a"),
        with_sources(assistant(1, ""), json!([])),
        assistant(2, "b"),
    ];
    let fold = fold_ok(&events);
    assert_eq!(labels(&fold), ["current", "current", "current"]);
    let messages = model_messages(&fold, &events);
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0], events[0].data);
    assert_eq!(messages[1], events[2].data["message"]);
}

// ---------------------------------------------------------------------------------------------------
// Views

#[test]
fn views_follow_the_surface_and_the_appends() {
    let events = [
        user(0, "question"),
        assistant(1, "calling"),
        log_only(2, "tool/call"),
        tool_result(3, "c1", "long output"),
        log_only(4, "compaction/prune"),
        pruned(5, 3, tool_data("c1", "[pruned]")),
        log_only(6, "compaction/start"),
        replacing(user(7, "checkpoint"), 0, 1, json!([6, 0, 1])),
        assistant(8, "answer"),
    ];
    let fold = fold_ok(&events);
    let surface: Vec<u64> = current_surface(&fold, &events)
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(surface, [7, 5, 8]);
    let messages = model_messages(&fold, &events);
    assert_eq!(
        messages,
        vec![
            events[7].data.as_value().clone(),
            events[5].data["message"].clone(),
            events[8].data["message"].clone()
        ]
    );
    // The human transcript keeps the shadowed originals and leaves out the model-only replacements.
    let transcript: Vec<u64> = human_transcript(&events).iter().map(|e| e.seq).collect();
    assert_eq!(transcript, [0, 1, 3, 8]);
    // A slice shorter than the fold is tolerated, not a panic.
    assert_eq!(current_surface(&fold, &events[..6]).len(), 1);
}

#[test]
fn human_transcript_needs_the_exact_append_string_on_a_message_type() {
    let mut odd = log_only(0, "tool/call");
    odd.surface_op = Some(json!("append"));
    let events = [
        odd,
        user(1, "a"),
        with_op(user(2, "b"), Some(json!("Append"))),
    ];
    let transcript: Vec<u64> = human_transcript(&events).iter().map(|e| e.seq).collect();
    assert_eq!(transcript, [1]);
}

// ---------------------------------------------------------------------------------------------------
// Errors and state

#[test]
fn fold_error_becomes_an_invalid_surface_log_error() {
    let err = FoldError {
        seq: 5,
        message: "session event seq 5 is not contiguous; expected 4".into(),
    };
    assert_eq!(
        err.to_string(),
        "invalid session surface: session event seq 5 is not contiguous; expected 4"
    );
    let log: LogError = err.into();
    assert_eq!(log.code, LogErrorCode::InvalidSurface);
    assert_eq!(log.seq, Some(5));
    assert_eq!(
        log.message,
        "invalid session surface: session event seq 5 is not contiguous; expected 4"
    );
    let boxed: Box<dyn std::error::Error> = Box::new(FoldError {
        seq: 0,
        message: "x".into(),
    });
    assert_eq!(boxed.to_string(), "invalid session surface: x");
}

#[test]
fn validate_next_does_not_apply() {
    let mut fold = fold_ok(&[user(0, "a")]);
    fold.validate_next(&assistant(1, "b")).unwrap();
    assert_eq!(fold.folded(), 1);
    assert!(fold.validate_next(&assistant(2, "b")).is_err());
    fold.apply(&assistant(1, "b")).unwrap();
    assert_eq!(fold.folded(), 2);
}

#[test]
fn a_fold_continues_after_a_rejected_event() {
    let mut fold = SurfaceFold::new();
    fold.apply(&user(0, "a")).unwrap();
    assert!(fold.apply(&with_op(user(1, "b"), None)).is_err());
    fold.apply(&user(1, "b")).unwrap();
    assert_eq!(fold.nodes(), &[0, 1]);
}

// ---------------------------------------------------------------------------------------------------
// Real DSH logs (read in place from ../shared/fixtures/dsh-real beside the checkout; skipped without it)

#[test]
fn real_compaction_logs_fold_as_dsh_labels_them() {
    use dsh_codec::log::read::{read_log, ReadOptions};
    let Some(dir) = dsh_fixtures::real_fixtures_dir() else {
        return;
    };
    // compaction-recovery: the checkpoint at 21 replaced the first prompt (4), citing [19, 20, 4].
    let log = read_log(
        &dir.join("examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl"),
        &ReadOptions::default(),
    )
    .expect("fixture reads");
    let fold = fold_ok(&log.events);
    assert_eq!(fold.label(4), Some(Label::Shadowed));
    assert_eq!(fold.label(21), Some(Label::Current));
    assert_eq!(fold.replaced_by(4), Some(21));
    assert_eq!(
        fold.replacements(),
        &[Replacement {
            seq: 21,
            start: 4,
            end: 4,
            shadowed: vec![4]
        }]
    );
    // The checkpoint takes the prompt's place at the head of the surface: surface order, not seq order.
    assert_eq!(fold.nodes(), &[21, 13, 15, 28]);
    assert_eq!(
        fold.labels()
            .iter()
            .filter(|l| **l == Label::LogOnly)
            .count(),
        log.events.len() - 5
    );
    let messages = model_messages(&fold, &log.events);
    assert_eq!(messages.len(), 4);
    assert_eq!(
        human_transcript(&log.events)
            .iter()
            .map(|e| e.seq)
            .collect::<Vec<_>>(),
        [4, 13, 15, 28]
    );

    // agent-instructions: a refreshed instructions message (17) replaced the earlier one (5).
    let log = read_log(
        &dir.join("examples__acp-agent__tests__snapshots__agent-instructions__session.jsonl"),
        &ReadOptions::default(),
    )
    .expect("fixture reads");
    let fold = fold_ok(&log.events);
    assert_eq!(fold.label(5), Some(Label::Shadowed));
    assert_eq!(fold.replacement_chain(5), vec![17]);
}

#[test]
fn every_real_log_that_reads_folds() {
    use dsh_codec::log::read::{read_log, ReadOptions};
    let Some(dir) = dsh_fixtures::real_fixtures_dir() else {
        return;
    };
    let entries = std::fs::read_dir(&dir).expect("the fixtures folder lists");
    let mut folded = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.to_string_lossy().ends_with(".jsonl") {
            continue;
        }
        // Reading is the reader's business (its own tests cover refusals); DSH wrote every one of these
        // logs, so whatever reads must fold.
        let Ok(log) = read_log(&path, &ReadOptions::default()) else {
            continue;
        };
        if let Err(err) = SurfaceFold::fold(&log.events) {
            panic!("{}: {err}", path.display());
        }
        folded += 1;
    }
    eprintln!("{folded} real logs folded");
    assert!(folded > 20, "only {folded} fixtures read");
}
