//! Opening one plugin library and checking it before anything of it is used.
//!
//! Order of checks, each with its own refusal: the file opens as a shared library → it exports our
//! contract stamp, of our contract major and a minor we know (read before anything abi_stable does, so
//! a plugin of another major is refused as such even when its layouts no longer resemble ours) → it
//! exports the abi_stable root-module symbol → its abi_stable header is compatible → abi_stable's layout
//! check of the root module passes → its [`FOLD_VERSION`] equals ours. A refused library never serves
//! a call; the host logs why and goes on with the others.
//!
//! Libraries are never unloaded: once a library's code has run (abi_stable runs its globals initialiser
//! and root-module constructor during the checks), unmapping it could leave dangling vtables or
//! thread-local destructors behind. Each load therefore keeps one mapping; the host bounds how many.

use std::path::{Path, PathBuf};

use abi_stable::library::{
    AbiHeaderRef, LibraryError, RootModule, ROOT_MODULE_LOADER_NAME_WITH_NUL,
};
use dsh_codec::FOLD_VERSION;
use host_api::abi::version::CONTRACT_SYMBOL;
use host_api::abi::{ContractStamp, ContractVersion, PluginRoot_Ref, CONTRACT};

/// Why a library was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("not a loadable shared library: {0}")]
    NotALibrary(String),
    #[error("not a plugin: the library exports no abi_stable root module ({0})")]
    NoRootModule(String),
    #[error("built with an incompatible abi_stable: {0}")]
    AbiStableHeader(String),
    #[error("failed abi_stable's layout check of the plugin root module: {0}")]
    Layout(String),
    #[error("not a plugin of this host: the library exports no `{CONTRACT_SYMBOL}` contract stamp (built against a contract older than 2.0, or not a plugin)")]
    NoContract,
    #[error("refused: {0}")]
    Contract(String),
    #[error(
        "plugin {name} {version} was built with log-format/fold version {found}; this host uses version {expected}, \
         so the two would label events differently"
    )]
    FoldVersion {
        name: String,
        version: String,
        found: u32,
        expected: u32,
    },
    #[error("could not make a shadow copy of the library: {0}")]
    ShadowCopy(String),
    #[error("reload limit reached: {0} generations are already mapped (libraries are never unloaded); restart the host to load more")]
    ReloadLimit(usize),
}

impl Refusal {
    /// A short stable tag for scripts (`plugins --json`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotALibrary(_) => "not-a-library",
            Self::NoRootModule(_) => "no-root-module",
            Self::AbiStableHeader(_) => "abi-stable-header",
            Self::Layout(_) => "layout-mismatch",
            Self::NoContract => "no-contract",
            Self::Contract(_) => "contract-version",
            Self::FoldVersion { .. } => "fold-version",
            Self::ShadowCopy(_) => "shadow-copy",
            Self::ReloadLimit(_) => "reload-limit",
        }
    }
}

/// A checked plugin library, mapped for the life of the process.
#[derive(Clone, Copy)]
pub struct CheckedPlugin {
    pub root: PluginRoot_Ref,
    /// The contract the plugin was built against (same major as ours, minor ≤ ours).
    pub contract: ContractVersion,
}

impl CheckedPlugin {
    pub fn name(&self) -> String {
        self.root.name().to_string()
    }

    pub fn version(&self) -> String {
        self.root.version().to_string()
    }
}

/// Opens `path` (a private shadow copy: see `crate::shadow`) and checks it.
pub fn open_and_check(path: &Path) -> Result<CheckedPlugin, Refusal> {
    // RTLD_LOCAL: every generation bundles its own SQLite with the same symbol names; local binding keeps
    // one generation's references from resolving into another's copy. RTLD_NOW: fail here, not mid-call.
    let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL;
    // SAFETY: loading a library runs its initialisers. We only load files from the plugin folder the
    // user pointed us at, which is the contract of a plugin host.
    let library = unsafe { libloading::os::unix::Library::open(Some(path), flags) }
        .map_err(|e| Refusal::NotALibrary(e.to_string()))?;
    // SAFETY: the symbol, when present, is a `ContractStamp` static: plain `repr(C)` integers whose
    // layout is fixed across every contract major; its magic rules out an unrelated symbol of that name.
    let stamp: Option<ContractStamp> = unsafe {
        library
            .get::<*const ContractStamp>(format!("{CONTRACT_SYMBOL}\0").as_bytes())
            .ok()
            .map(|sym| **sym)
    };
    let stamp = match stamp {
        Some(stamp) if stamp.magic == host_api::abi::version::CONTRACT_MAGIC => stamp,
        _ => {
            drop(library);
            return Err(Refusal::NoContract);
        }
    };
    if let Err(why) = CONTRACT.accepts(stamp.contract()) {
        // Only static initialisers ran; closing is safe.
        drop(library);
        return Err(Refusal::Contract(why));
    }
    // SAFETY: the symbol, when present, is abi_stable's header static, whose address is its `AbiHeaderRef`.
    let header: Result<AbiHeaderRef, _> = unsafe {
        library
            .get::<AbiHeaderRef>(ROOT_MODULE_LOADER_NAME_WITH_NUL.as_bytes())
            .map(|s| *s)
    };
    let header = match header {
        Ok(h) => h,
        Err(e) => {
            // Nothing of the library ran beyond its static initialisers, so closing it is safe.
            drop(library);
            return Err(Refusal::NoRootModule(e.to_string()));
        }
    };
    // From here on the library's code runs; it must stay mapped (module docs).
    std::mem::forget(library);
    let lib_header = header
        .upgrade()
        .map_err(|e| Refusal::AbiStableHeader(describe(&e)))?;
    let layout = |e: LibraryError| Refusal::Layout(describe(&e));
    let root = if stamp.minor == CONTRACT.minor {
        lib_header
            .init_root_module::<PluginRoot_Ref>()
            .map_err(layout)?
    } else {
        // An older minor: abi_stable would refuse its shorter vtables against today's types, so check
        // it exactly against that minor's frozen types, then use it through today's (see
        // `host_api::abi::frozen` for why that is sound).
        match stamp.minor {
            0 => lib_header
                .ensure_layout::<host_api::abi::frozen::v2_0::PluginRoot_Ref>()
                .map_err(layout)?,
            1 => lib_header
                .ensure_layout::<host_api::abi::frozen::v2_1::PluginRoot_Ref>()
                .map_err(layout)?,
            other => {
                return Err(Refusal::Contract(format!(
                "it was built against plugin contract {}.{other}, which this host has no frozen \
                     layout of",
                stamp.major
            )))
            }
        }
        // SAFETY: the library's root module passed abi_stable's full layout check against the frozen
        // types of its own minor, which today's types extend only by vtable entries appended after
        // each `last_prefix_field`; abi_stable guards those with runtime accessibility checks, and the
        // host's client never calls one the plugin's minor lacks.
        unsafe { lib_header.init_root_module_with_unchecked_layout::<PluginRoot_Ref>() }
            .map_err(layout)?
    };
    let checked = CheckedPlugin {
        root,
        contract: stamp.contract(),
    };
    if root.contract() != stamp.contract() {
        return Err(Refusal::Contract(format!(
            "its contract stamp says {} but its root module says {}",
            stamp.contract(),
            root.contract()
        )));
    }
    if root.fold_version() != FOLD_VERSION {
        return Err(Refusal::FoldVersion {
            name: checked.name(),
            version: checked.version(),
            found: root.fold_version(),
            expected: FOLD_VERSION,
        });
    }
    Ok(checked)
}

/// abi_stable's errors are long multi-line reports whose useful part is at the end: see
/// [`crate::layout_report`].
fn describe(e: &LibraryError) -> String {
    crate::layout_report::summarize(&e.to_string())
}

/// Whether a directory entry looks like a shared library on this platform.
pub fn is_library_file(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "so" | "dylib" | "dll"))
}

/// The file name every build of the real plugin has on this platform.
pub fn plugin_file_name() -> PathBuf {
    PluginRoot_Ref::get_library_path(Path::new(""))
}
