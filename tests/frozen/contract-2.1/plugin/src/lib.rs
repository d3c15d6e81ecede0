//! Test fixture: a plugin built against the frozen contract 2.1 (`../host-api`), as a plugin compiled
//! before contract 2.2 existed would be. It answers `list_sessions` from the host's live sessions (so a
//! test sees it serve, calling back into today's host), `diagnostics`, and both searches with one fixed
//! hit, the way a 2.1 plugin answers: a literal phrase in spec order, whatever request fields a newer
//! host adds (it has never heard of them).

use abi_stable::{
    export_root_module,
    prefix_type::PrefixTypeTrait,
    sabi_trait::TD_Opaque,
    std_types::{RResult, RStr, RString},
};
use host_api::*;

/// The contract this plugin was built against, readable before anything else of the library.
#[no_mangle]
pub static dsh_plugin_contract: ContractStamp = STAMP;

fn not_here(what: &str) -> RResult<RString, PluginError> {
    RResult::RErr(PluginError {
        code: ErrorCode::PluginNotImplemented,
        name: "PLUGIN_NOT_IMPLEMENTED".into(),
        message: format!("{what} is not in the frozen 2.1 fixture").into(),
    })
}

struct Query(std::sync::Arc<HostContextBox>);

/// The one session and hit both searches answer with.
const HIT_HEADER: &str = r#"{"version":0,"id":"frozen-2-1-session","createdAt":1764460800000,"cwd":"/frozen"}"#;
const HIT: &str = r#"{"sessionId":"frozen-2-1-session","seq":1,"type":"user/message","time":1764460800000,"surface":"current","snippet":"a phrase hit from the frozen 2.1 plugin"}"#;

impl SessionQuery for Query {
    fn list_sessions(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        // Live sessions come as `[{"header":{…},"eventCount":n,"epoch":e}]`; answer session records
        // `[{"header":{…},"live":true,"persisted":false}]` without a JSON library: the header object is
        // passed through as it is.
        let live = self.0.live_sessions();
        self.0.log(
            LogLevel::Info,
            RStr::from_str("frozen 2.1 plugin: list_sessions"),
        );
        let records: Vec<String> = split_objects(live.as_str())
            .into_iter()
            .filter_map(|o| {
                header_of(o)
                    .map(|h| format!("{{\"header\":{h},\"live\":true,\"persisted\":false}}"))
            })
            .collect();
        RResult::ROk(format!("[{}]", records.join(",")).into())
    }
    fn read_session(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        not_here("read_session")
    }
    fn filter_sessions(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        not_here("filter_sessions")
    }
    fn filter_events(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        not_here("filter_events")
    }
    fn list_events(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        not_here("list_events")
    }
    fn read_surface(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        not_here("read_surface")
    }
    fn read_event(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        not_here("read_event")
    }
    fn trace_session(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        not_here("trace_session")
    }
    fn trace_event(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        not_here("trace_event")
    }
    fn read_title_snapshots(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        not_here("read_title_snapshots")
    }
    fn search_sessions(&self, _: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError> {
        self.0.log(
            LogLevel::Info,
            RStr::from_str(&format!("frozen 2.1 plugin: search_sessions {request}")),
        );
        RResult::ROk(
            format!(
                "{{\"items\":[{{\"header\":{HIT_HEADER},\"live\":false,\"persisted\":true,\"bestMatch\":{HIT}}}],\
                 \"nextCursor\":null,\"skipped\":[]}}"
            )
            .into(),
        )
    }
    fn search_events(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        RResult::ROk(format!("{{\"items\":[{HIT}],\"nextCursor\":null,\"skipped\":[]}}").into())
    }
    fn problems(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        RResult::ROk("[]".into())
    }
    fn diagnostics(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        RResult::ROk("{\"sessionsIndexed\":1,\"skipped\":[]}".into())
    }
}

/// The top-level objects of a JSON array, as text (enough for the host's own compact output).
fn split_objects(array: &str) -> Vec<&str> {
    let bytes = array.as_bytes();
    let (mut out, mut depth, mut start, mut in_str, mut esc) =
        (Vec::new(), 0i32, 0usize, false, false);
    for (i, &b) in bytes.iter().enumerate() {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' => {
                if depth == 0 {
                    start = i;
                }
                depth += 1;
            }
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    out.push(&array[start..=i]);
                }
            }
            _ => {}
        }
    }
    out
}

/// The `"header":{…}` object of a live-session record.
fn header_of(object: &str) -> Option<&str> {
    let at = object.find("\"header\":")? + "\"header\":".len();
    split_objects(&object[at..]).into_iter().next()
}

struct Resolver;

impl SessionReferenceResolver for Resolver {
    fn list_candidates(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        not_here("list_candidates")
    }
    fn prepare(&self, _: CallRef<'_>, _: RStr<'_>) -> RResult<RString, PluginError> {
        not_here("prepare")
    }
}

struct Instance(std::sync::Arc<HostContextBox>);

impl PluginInstance for Instance {
    fn session_query(&self) -> SessionQueryBox {
        SessionQuery_TO::from_value(Query(self.0.clone()), TD_Opaque)
    }
    fn reference_resolver(&self) -> SessionReferenceResolverBox {
        SessionReferenceResolver_TO::from_value(Resolver, TD_Opaque)
    }
}

extern "C" fn new(
    _config: RStr<'_>,
    host: HostContextBox,
) -> RResult<PluginInstanceBox, PluginError> {
    RResult::ROk(PluginInstance_TO::from_value(
        Instance(std::sync::Arc::new(host)),
        TD_Opaque,
    ))
}

#[export_root_module]
pub fn get_root_module() -> PluginRoot_Ref {
    PluginRoot {
        contract: ContractVersion { major: 2, minor: 1 },
        fold_version: STAMP.fold_version,
        name: RStr::from_str("dsh-session-search"),
        version: RStr::from_str("0.1.0-frozen-2.1"),
        new,
    }
    .leak_into_prefix()
}
