//! FROZEN: the plugin contract exactly as it was at version 2.1 (the types that cross the boundary; no
//! log codec, no JSON records). Never edit this file: it stands for every plugin already built against
//! 2.1, which today's host must keep loading. 2.1 is 2.0 plus `SessionQuery::diagnostics` and
//! `HostContext::report_progress`; contract 2.2 appended only JSON request fields (all-words matching and
//! newest-first order), so these layouts are also 2.2's, but a 2.1 plugin ignores those fields.
//!
//! Two users: the host checks a 2.1 plugin's layout against these types, and the test fixture
//! `tests/frozen/contract-2.1` builds a plugin from this very file. It depends on nothing but
//! abi_stable, so that fixture can include it as it is.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    package_version_strings, sabi_trait,
    sabi_types::{RRef, VersionStrings},
    std_types::{RBox, ROption, RResult, RStr, RString, RVec},
    StableAbi,
};

#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    pub const PluginNotImplemented: ErrorCode = ErrorCode(102);
    pub const PluginBadMessage: ErrorCode = ErrorCode(105);
}

#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct PluginError {
    pub code: ErrorCode,
    pub name: RString,
    pub message: RString,
}

#[sabi_trait]
pub trait CallContext: Sync {
    fn is_cancelled(&self) -> bool;
    fn deadline_unix_ms(&self) -> ROption<i64>;
    #[sabi(last_prefix_field)]
    fn calling_session(&self) -> ROption<RString>;
}

pub type CallRef<'a> = CallContext_TO<'a, RRef<'a, ()>>;

#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogLevel(pub u8);

impl LogLevel {
    pub const Info: LogLevel = LogLevel(2);
}

#[sabi_trait]
pub trait HostContext: Send + Sync + 'static {
    fn live_sessions(&self) -> RString;
    fn live_session(&self, id: RStr<'_>) -> ROption<RString>;
    fn live_events(&self, id: RStr<'_>, epoch: u64, from_seq: u64) -> ROption<RVec<RString>>;
    fn sessions_root(&self) -> ROption<RString>;
    #[sabi(last_prefix_field)]
    fn log(&self, level: LogLevel, message: RStr<'_>);
    fn report_progress(&self, task: RStr<'_>, done: u64, total: u64);
}

pub type HostContextBox = HostContext_TO<RBox<()>>;

#[sabi_trait]
pub trait SessionQuery: Send + Sync + 'static {
    fn list_sessions(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
    fn read_session(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
    fn filter_sessions(
        &self,
        call: CallRef<'_>,
        request: RStr<'_>,
    ) -> RResult<RString, PluginError>;
    fn filter_events(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
    fn list_events(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
    fn read_surface(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
    fn read_event(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
    fn trace_session(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
    fn trace_event(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
    fn read_title_snapshots(
        &self,
        call: CallRef<'_>,
        request: RStr<'_>,
    ) -> RResult<RString, PluginError>;
    fn search_sessions(
        &self,
        call: CallRef<'_>,
        request: RStr<'_>,
    ) -> RResult<RString, PluginError>;
    fn search_events(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
    #[sabi(last_prefix_field)]
    fn problems(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
    fn diagnostics(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
}

pub type SessionQueryBox = SessionQuery_TO<RBox<()>>;

#[sabi_trait]
pub trait SessionReferenceResolver: Send + Sync + 'static {
    fn list_candidates(
        &self,
        call: CallRef<'_>,
        request: RStr<'_>,
    ) -> RResult<RString, PluginError>;
    #[sabi(last_prefix_field)]
    fn prepare(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
}

pub type SessionReferenceResolverBox = SessionReferenceResolver_TO<RBox<()>>;

#[sabi_trait]
pub trait PluginInstance: Send + Sync + 'static {
    fn session_query(&self) -> SessionQueryBox;
    #[sabi(last_prefix_field)]
    fn reference_resolver(&self) -> SessionReferenceResolverBox;
}

pub type PluginInstanceBox = PluginInstance_TO<RBox<()>>;

#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContractVersion {
    pub major: u16,
    pub minor: u16,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContractStamp {
    pub magic: u32,
    pub major: u16,
    pub minor: u16,
    pub fold_version: u32,
}

pub const STAMP: ContractStamp = ContractStamp {
    magic: 0x4453_4850,
    major: 2,
    minor: 1,
    fold_version: 1,
};

#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginRoot_Ref)))]
#[sabi(missing_field(panic))]
pub struct PluginRoot {
    pub contract: ContractVersion,
    pub fold_version: u32,
    pub name: RStr<'static>,
    pub version: RStr<'static>,
    #[sabi(last_prefix_field)]
    pub new: extern "C" fn(
        config: RStr<'_>,
        host: HostContextBox,
    ) -> RResult<PluginInstanceBox, PluginError>,
}

impl RootModule for PluginRoot_Ref {
    declare_root_module_statics! {PluginRoot_Ref}
    const BASE_NAME: &'static str = "dsh_session_search";
    const NAME: &'static str = "dsh session plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
