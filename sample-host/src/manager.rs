//! Plugin generations: loading every library in the plugin folder, serving calls from one of them, and
//! swapping in a new build without a failed call.
//!
//! A reload: make a private shadow of the changed library (`crate::shadow`: a reflink or a copy, never a
//! link, so a library rewritten in place cannot change under a mapping) → open and check the copy while the old generation keeps serving → take the write lock, which
//! waits for calls in flight to finish and holds new calls back → drop the old instance (its index closes)
//! → build the new instance (it opens the index) → release. A library that fails to load or check leaves
//! the old generation serving; one that fails to start brings the old build back up.
//!
//! Calls in flight when a reload comes get [`RELOAD_GRACE`] to finish; then the old generation's stop
//! flag cancels them (each answers its cancellation code) so a stuck call cannot hold a reload back.
//! Shutdown cancels them at once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use abi_stable::{sabi_trait::TD_Opaque, std_types::RStr};
use host_api::abi::{
    host::HostContext_TO, ErrorCode, LogLevel, PluginError, PluginInstanceBox, QueryClient,
    ResolverClient, SessionQueryBox, SessionReferenceResolverBox,
};

use crate::context::{GenerationContext, Shared};
use crate::loader::{is_library_file, open_and_check, CheckedPlugin, Refusal};
use crate::shadow::{self, ShadowKind, ShadowStore};

/// How long a reload waits for calls in flight on the old generation before it cancels them.
pub const RELOAD_GRACE: Duration = Duration::from_secs(2);

/// How the host finds and builds plugins.
#[derive(Debug, Clone)]
pub struct HostOptions {
    pub plugins_dir: PathBuf,
    /// Load only the library with this file name (used when falling back to cargo's output folder, which
    /// also holds test fixture libraries).
    pub only_file: Option<std::ffi::OsString>,
    /// The JSON config every plugin instance is built with.
    pub plugin_config: String,
    /// Where shadows are made: a folder of this process (long-running hosts), or memory (one-shot
    /// commands: no folder at all).
    pub shadows: ShadowPlace,
    /// How many libraries may be mapped in this process (each load keeps one mapping).
    pub max_mapped: usize,
}

/// Where a host makes its shadows (`crate::shadow`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShadowPlace {
    /// A private folder `sample-host-shadow-<pid>-…` in this folder (the temporary folder when `None`).
    Folder(Option<PathBuf>),
    /// Anonymous memory: nothing on disk.
    Memory,
}

impl HostOptions {
    pub fn new(plugins_dir: impl Into<PathBuf>, plugin_config: impl Into<String>) -> Self {
        Self {
            plugins_dir: plugins_dir.into(),
            only_file: None,
            plugin_config: plugin_config.into(),
            shadows: ShadowPlace::Folder(None),
            max_mapped: 64,
        }
    }
}

/// What the host knows about one library file in the plugin folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotState {
    /// This library's generation serves calls.
    Serving {
        generation: u64,
        name: String,
        version: String,
    },
    /// A good plugin, not serving because another library already does.
    Standby { name: String, version: String },
    /// Refused: `code` is a stable tag, `reason` says why.
    Refused { code: String, reason: String },
}

/// Status of one library file, with the latest thing that happened to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotStatus {
    pub file: PathBuf,
    pub state: SlotState,
    /// E.g. a newer build that was refused while the old generation kept serving.
    pub note: Option<String>,
}

/// What a library file was when it was last loaded: a reload of an unchanged file is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

impl FileIdentity {
    fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(Self {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        })
    }
}

/// Where the time of one load went, for the line that reports it.
#[derive(Debug, Clone, Copy, Default)]
struct Timing {
    /// From the library's last change to the start of the load (the watcher's debounce and stability
    /// check); zero for a load not triggered by the watcher.
    waited: Duration,
    /// Making the shadow.
    copy: Duration,
    /// How the shadow was made (reflink, copy, memory copy).
    kind: Option<ShadowKind>,
    /// Opening and checking the copy.
    open: Duration,
}

impl Timing {
    /// "X ms: debounce D ms, copy C ms as a reflink, load L ms: open and check O ms, swap S ms", where the
    /// swap drains the old generation and builds the new one.
    fn describe(&self, swap: Duration) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let load = self.open + swap;
        format!(
            "{:.0} ms: debounce {:.0} ms, copy {:.0} ms {}, load {:.0} ms: open and check {:.0} ms, swap {:.0} ms",
            ms(self.waited + self.copy + load),
            ms(self.waited),
            ms(self.copy),
            self.kind.map_or("(none)", ShadowKind::name),
            ms(load),
            ms(self.open),
            ms(swap)
        )
    }
}

struct Active {
    generation: u64,
    file: PathBuf,
    plugin: CheckedPlugin,
    instance: Instance,
}

/// A built plugin instance and the two services taken from it. Dropping it drops all three, which
/// closes everything the instance opened.
struct Instance {
    query: SessionQueryBox,
    resolver: SessionReferenceResolverBox,
    _instance: PluginInstanceBox,
    /// Set to cancel every call in flight on this instance (a reload past its grace, shutdown).
    stop: AtomicBool,
}

/// The host's plugin runtime.
pub struct PluginHost {
    shared: Arc<Shared>,
    options: HostOptions,
    shadows: ShadowStore,
    serving: RwLock<Option<Active>>,
    catalog: Mutex<BTreeMap<PathBuf, SlotStatus>>,
    /// Identity of each file at its last load attempt.
    seen: Mutex<BTreeMap<PathBuf, FileIdentity>>,
    next_generation: AtomicU64,
    mapped: AtomicUsize,
    /// One load or swap at a time; calls are never blocked by a load, only by the swap itself.
    reload: Mutex<()>,
    /// Held by a swap (and by shutdown) from before it drains until the new generation serves. Calls
    /// pass through it before they take the serving lock, so a swap stops new calls at once and waits
    /// only for those in flight: a caller calling back to back otherwise kept the lock shared through
    /// the whole grace, and the swap cancelled its calls instead of waiting for them.
    gate: Mutex<()>,
    /// Why the last generation failed to start when nothing serves because of it (e.g. its index
    /// could not be opened): calls answer with this real cause, not a generic "no plugin".
    start_failure: Mutex<Option<PluginError>>,
    /// Told of every reload and refused build as it happens (a chat announces them inline).
    announcer: Mutex<Option<Announcer>>,
}

/// Receives one line per reload or refused build.
pub type Announcer = Box<dyn Fn(&str) + Send + Sync>;

impl PluginHost {
    /// Loads every library in the plugin folder (in file-name order; the first good one serves).
    pub fn start(options: HostOptions, shared: Arc<Shared>) -> std::io::Result<Arc<Self>> {
        let shadows = match &options.shadows {
            ShadowPlace::Folder(parent) => {
                // Hosts that died without cleaning up (kill -9, a crash) left their folders here.
                for stale in shadow::sweep_stale(parent.as_deref()) {
                    shared.log(
                        0,
                        LogLevel::Info,
                        format!(
                            "removed the shadow folder {} of a host no longer running",
                            stale.display()
                        ),
                    );
                }
                ShadowStore::folder(parent.as_deref())?
            }
            ShadowPlace::Memory => ShadowStore::memory(),
        };
        let host = Arc::new(Self {
            shared,
            options,
            shadows,
            serving: RwLock::new(None),
            catalog: Mutex::new(BTreeMap::new()),
            seen: Mutex::new(BTreeMap::new()),
            next_generation: AtomicU64::new(1),
            mapped: AtomicUsize::new(0),
            reload: Mutex::new(()),
            gate: Mutex::new(()),
            start_failure: Mutex::new(None),
            announcer: Mutex::new(None),
        });
        host.scan();
        Ok(host)
    }

    /// Sets (or clears) who is told of reloads and refused builds as they happen.
    pub fn set_announcer(&self, announcer: Option<Announcer>) {
        *self.announcer.lock().unwrap_or_else(|p| p.into_inner()) = announcer;
    }

    fn announce(&self, line: &str) {
        if let Some(a) = &*self.announcer.lock().unwrap_or_else(|p| p.into_inner()) {
            a(line);
        }
    }

    /// The shared state (live sessions, log).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The plugin folder.
    pub fn plugins_dir(&self) -> &Path {
        &self.options.plugins_dir
    }

    /// Whether the watcher should react to this path.
    pub fn watches(&self, path: &Path) -> bool {
        is_library_file(path)
            && path.parent() == Some(self.options.plugins_dir.as_path())
            && match &self.options.only_file {
                Some(name) => path.file_name() == Some(name.as_os_str()),
                None => true,
            }
    }

    /// Loads every library file in the folder that is not loaded yet.
    pub fn scan(&self) {
        let mut files: Vec<PathBuf> = match std::fs::read_dir(&self.options.plugins_dir) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| self.watches(p))
                .collect(),
            Err(e) => {
                self.shared.log(
                    0,
                    LogLevel::Error,
                    format!(
                        "cannot read plugin folder {}: {e}",
                        self.options.plugins_dir.display()
                    ),
                );
                return;
            }
        };
        files.sort();
        for file in files {
            let known = self
                .catalog
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&file);
            if !known {
                self.load_file(&file);
            }
        }
    }

    /// Loads (or reloads) one library file: check a shadow copy, then serve it if this file serves or
    /// nothing does.
    pub fn load_file(&self, file: &Path) {
        self.load_file_after(file, Duration::ZERO);
    }

    /// [`PluginHost::load_file`] for a change noticed `waited` ago (the watcher's debounce), so the
    /// reload line can say where the time went.
    pub fn load_file_after(&self, file: &Path, waited: Duration) {
        let _one_at_a_time = self.reload.lock().unwrap_or_else(|p| p.into_inner());
        // Watchers report more than content changes (metadata, a second event for one rename); loading
        // the same file twice would map it twice and cycle a generation for nothing.
        let identity = FileIdentity::of(file);
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if identity.is_some() && seen.get(file) == identity.as_ref() {
                return;
            }
            if let Some(identity) = identity {
                seen.insert(file.to_path_buf(), identity);
            }
        }
        let mut timing = Timing {
            waited,
            ..Timing::default()
        };
        match self.load_checked(file, &mut timing) {
            Err(refusal) => self.refuse(file, refusal),
            Ok(plugin) => {
                let serving_file = self
                    .serving
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                    .map(|a| a.file.clone());
                match serving_file {
                    Some(f) if f != file => {
                        self.shared.log(
                            0,
                            LogLevel::Info,
                            format!(
                                "{} ({} {}) is on standby: {} already serves",
                                file.display(),
                                plugin.name(),
                                plugin.version(),
                                f.display()
                            ),
                        );
                        self.set_status(
                            file,
                            SlotState::Standby {
                                name: plugin.name(),
                                version: plugin.version(),
                            },
                            None,
                        );
                    }
                    _ => self.swap_in(file, plugin, timing),
                }
            }
        }
    }

    fn load_checked(&self, file: &Path, timing: &mut Timing) -> Result<CheckedPlugin, Refusal> {
        let mapped = self.mapped.load(Ordering::SeqCst);
        if mapped >= self.options.max_mapped {
            return Err(Refusal::ReloadLimit(mapped));
        }
        let shadow = self
            .shadows
            .make(file, &self.shadow_name(file))
            .map_err(|e| Refusal::ShadowCopy(e.to_string()))?;
        let started = Instant::now();
        let result = open_and_check(&shadow.path);
        timing.copy = shadow.took;
        timing.kind = Some(shadow.kind);
        timing.open = started.elapsed();
        self.shared.log(
            0,
            LogLevel::Debug,
            format!(
                "timing: {} shadow {} {} µs, open and check {} µs",
                file.display(),
                shadow.kind.name(),
                shadow.took.as_micros(),
                timing.open.as_micros()
            ),
        );
        if !matches!(
            result,
            Err(Refusal::NotALibrary(_)) | Err(Refusal::NoRootModule(_))
        ) {
            self.mapped.fetch_add(1, Ordering::SeqCst);
        }
        // The mapping outlives the file; removing it keeps the shadow folder empty between loads.
        shadow.forget_name();
        result
    }

    fn shadow_name(&self, file: &Path) -> String {
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "plugin".into());
        let ext = file
            .extension()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "so".into());
        let n = self.next_generation.load(Ordering::SeqCst);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!("{stem}.gen{n}.{nanos}.{ext}")
    }

    fn refuse(&self, file: &Path, refusal: Refusal) {
        let serving_generation = self
            .serving
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .filter(|a| a.file == file)
            .map(|a| a.generation);
        let message = match serving_generation {
            Some(generation) => format!(
                "refused new build {}: {refusal}; generation {generation} keeps serving; {}",
                file.display(),
                self.mapped_report()
            ),
            None => format!(
                "refused plugin library {}: {refusal}; {}",
                file.display(),
                self.mapped_report()
            ),
        };
        self.shared.log(0, LogLevel::Warn, message);
        if let Some(generation) = serving_generation {
            self.announce(&format!(
                "plugin: refused a new build of {} ({}): {refusal}; generation {generation} keeps serving",
                file.file_name().unwrap_or_default().to_string_lossy(),
                refusal.code()
            ));
        }
        let mut catalog = self.catalog.lock().unwrap_or_else(|p| p.into_inner());
        let serving_this = matches!(
            catalog.get(file),
            Some(SlotStatus {
                state: SlotState::Serving { .. },
                ..
            })
        );
        if serving_this {
            // The old generation keeps serving; remember why the new build was not taken.
            if let Some(status) = catalog.get_mut(file) {
                status.note = Some(format!("a newer build was refused ({}): {refusal}; the previous generation keeps serving", refusal.code()));
            }
        } else {
            catalog.insert(
                file.to_path_buf(),
                SlotStatus {
                    file: file.to_path_buf(),
                    state: SlotState::Refused {
                        code: refusal.code().into(),
                        reason: refusal.to_string(),
                    },
                    note: None,
                },
            );
        }
    }

    fn set_status(&self, file: &Path, state: SlotState, note: Option<String>) {
        self.catalog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                file.to_path_buf(),
                SlotStatus {
                    file: file.to_path_buf(),
                    state,
                    note,
                },
            );
    }

    fn build(&self, plugin: CheckedPlugin, generation: u64) -> Result<Instance, PluginError> {
        let context = HostContext_TO::from_value(
            GenerationContext {
                shared: self.shared.clone(),
                generation,
            },
            TD_Opaque,
        );
        let new = plugin.root.new();
        let config = self.config_for(&plugin, generation);
        let started = std::time::Instant::now();
        let built = new(RStr::from_str(&config), context).into_result();
        self.shared.log(
            generation,
            LogLevel::Debug,
            format!(
                "timing: generation {generation} built in {} µs",
                started.elapsed().as_micros()
            ),
        );
        built.map(|instance| Instance {
            query: instance.session_query(),
            resolver: instance.reference_resolver(),
            _instance: instance,
            stop: AtomicBool::new(false),
        })
    }

    /// The config text for this plugin: the host's own, less the keys the plugin's contract minor
    /// does not know (plugins before 2.2 refuse an unknown key), each left-out key said in the log.
    fn config_for(&self, plugin: &CheckedPlugin, generation: u64) -> String {
        let text = &self.options.plugin_config;
        let Ok(serde_json::Value::Object(map)) = serde_json::from_str(text) else {
            return text.clone();
        };
        let (fitted, dropped) = host_api::abi::config::fit_for(plugin.contract, &map);
        if dropped.is_empty() {
            return text.clone();
        }
        self.shared.log(
            generation,
            LogLevel::Info,
            format!(
                "not sent to this plugin (contract {}, which predates them): {}",
                plugin.contract,
                dropped.join(", ")
            ),
        );
        serde_json::Value::Object(fitted).to_string()
    }

    /// The serving lock for writing: calls in flight get `grace` to finish, then are cancelled
    /// through their generation's stop flag and waited for.
    fn drain(&self, grace: Duration) -> std::sync::RwLockWriteGuard<'_, Option<Active>> {
        let until = Instant::now() + grace;
        loop {
            match self.serving.try_write() {
                Ok(guard) => return guard,
                Err(std::sync::TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) if Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(std::sync::TryLockError::WouldBlock) => break,
            }
        }
        if let Some(active) = self
            .serving
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            active.instance.stop.store(true, Ordering::SeqCst);
            self.shared.log(
                active.generation,
                LogLevel::Info,
                format!(
                    "cancelled the calls still in flight on generation {} to swap it out",
                    active.generation
                ),
            );
        }
        self.serving.write().unwrap_or_else(|p| p.into_inner())
    }

    fn swap_in(&self, file: &Path, plugin: CheckedPlugin, timing: Timing) {
        let swap_started = Instant::now();
        let generation = self.next_generation.fetch_add(1, Ordering::SeqCst);
        // Waits for calls in flight on the old generation (cancelling those past the grace); new calls
        // queue behind us once we wait on the lock itself.
        let _gate = self.gate.lock().unwrap_or_else(|p| p.into_inner());
        let mut serving = self.drain(RELOAD_GRACE);
        let previous = serving.take().map(|old| {
            let Active {
                generation: old_gen,
                file: old_file,
                plugin: old_plugin,
                instance,
            } = old;
            drop(instance); // closes the old generation's index before the new one opens it
            self.shared.log(
                old_gen,
                LogLevel::Debug,
                format!("generation {old_gen} drained and dropped"),
            );
            (old_gen, old_file, old_plugin)
        });
        match self.build(plugin, generation) {
            Ok(instance) => {
                let took = timing.describe(swap_started.elapsed());
                let message = match &previous {
                    Some((_, _, old_plugin)) => format!(
                        "reloaded {} {} → {} {} (generation {generation}, {took}); {}",
                        old_plugin.name(),
                        old_plugin.version(),
                        plugin.name(),
                        plugin.version(),
                        self.mapped_report()
                    ),
                    None => format!(
                        "generation {generation} serving: {} {} from {} ({took}); {}",
                        plugin.name(),
                        plugin.version(),
                        file.display(),
                        self.mapped_report()
                    ),
                };
                self.shared.log(0, LogLevel::Info, message);
                if let Some((_, _, old)) = &previous {
                    self.announce(&format!(
                        "plugin: reloaded {} {} → {} (generation {generation}, {took})",
                        old.name(),
                        old.version(),
                        plugin.version()
                    ));
                }
                *self.start_failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
                *serving = Some(Active {
                    generation,
                    file: file.to_path_buf(),
                    plugin,
                    instance,
                });
                drop(serving);
                self.set_status(
                    file,
                    SlotState::Serving {
                        generation,
                        name: plugin.name(),
                        version: plugin.version(),
                    },
                    None,
                );
            }
            Err(e) => {
                self.shared.log(
                    generation,
                    LogLevel::Error,
                    format!("generation {generation} failed to start: {e}"),
                );
                let note = format!("a newer build failed to start: {e}");
                match previous {
                    Some((old_gen, old_file, old_plugin)) => {
                        match self.build(old_plugin, old_gen) {
                            Ok(instance) => {
                                self.shared.log(
                                    old_gen,
                                    LogLevel::Info,
                                    format!("generation {old_gen} restored"),
                                );
                                self.announce(&format!(
                                    "plugin: a new build failed to start ({e}); generation {old_gen} serves again"
                                ));
                                *serving = Some(Active {
                                    generation: old_gen,
                                    file: old_file.clone(),
                                    plugin: old_plugin,
                                    instance,
                                });
                                drop(serving);
                                self.set_status(
                                    &old_file,
                                    SlotState::Serving {
                                        generation: old_gen,
                                        name: old_plugin.name(),
                                        version: old_plugin.version(),
                                    },
                                    Some(note),
                                );
                            }
                            Err(e2) => {
                                drop(serving);
                                self.set_status(
                                    file,
                                    SlotState::Refused {
                                        code: "init-failed".into(),
                                        reason: format!(
                                            "{e}; restoring the previous build failed too: {e2}"
                                        ),
                                    },
                                    None,
                                );
                            }
                        }
                    }
                    None => {
                        drop(serving);
                        *self.start_failure.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(e.clone());
                        self.set_status(
                            file,
                            SlotState::Refused {
                                code: "init-failed".into(),
                                reason: e.to_string(),
                            },
                            None,
                        );
                    }
                }
            }
        }
    }

    /// Calls the serving `SessionQuery`. `PLUGIN_UNAVAILABLE` when no plugin serves.
    ///
    /// Re-entrancy: the serving lock is held (shared) during the call, and nothing the plugin's
    /// `HostContext` callbacks do takes it; a swap waits for calls in flight instead.
    pub fn query<T>(
        &self,
        call: impl FnOnce(&QueryClient<'_>) -> Result<T, PluginError>,
    ) -> Result<T, PluginError> {
        self.query_traced(call).0
    }

    /// Like [`PluginHost::query`], also saying which generation answered: (generation, plugin version).
    pub fn query_traced<T>(
        &self,
        call: impl FnOnce(&QueryClient<'_>) -> Result<T, PluginError>,
    ) -> (Result<T, PluginError>, Option<(u64, String)>) {
        let serving = self.serving_for_call();
        match serving.as_ref() {
            Some(active) => (
                call(
                    &QueryClient::new(&active.instance.query, active.plugin.contract)
                        .with_stop(&active.instance.stop),
                ),
                Some((active.generation, active.plugin.version())),
            ),
            None => (Err(self.unavailable()), None),
        }
    }

    /// Calls the serving `SessionReferenceResolver`.
    pub fn resolver<T>(
        &self,
        call: impl FnOnce(&ResolverClient<'_>) -> Result<T, PluginError>,
    ) -> Result<T, PluginError> {
        let serving = self.serving_for_call();
        match serving.as_ref() {
            Some(active) => call(
                &ResolverClient::new(&active.instance.resolver).with_stop(&active.instance.stop),
            ),
            None => Err(self.unavailable()),
        }
    }

    /// The serving lock, shared, for one call: taken after passing the swap's gate, so a swap that
    /// has begun is waited for rather than kept waiting by calls arriving after it.
    fn serving_for_call(&self) -> std::sync::RwLockReadGuard<'_, Option<Active>> {
        drop(self.gate.lock().unwrap_or_else(|p| p.into_inner()));
        self.serving.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Why no generation serves: the plugin's own error when it failed to start (its code and words,
    /// e.g. `SESSION_QUERY_INDEX_FAILED` naming the index and its holder), else `PLUGIN_UNAVAILABLE`.
    pub fn unavailable(&self) -> PluginError {
        if let Some(e) = self
            .start_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            return e;
        }
        let refused = self
            .status()
            .iter()
            .any(|s| matches!(s.state, SlotState::Refused { .. }));
        PluginError::new(
            ErrorCode::PluginUnavailable,
            format!(
                "no plugin serves ctx.sessionQuery (plugin folder: {}{})",
                self.options.plugins_dir.display(),
                if refused {
                    "; its libraries were refused"
                } else {
                    "; no plugin library there"
                }
            ),
        )
    }

    /// Whether nothing serves because the plugin failed to start (not because no library was found).
    pub fn failed_to_start(&self) -> bool {
        self.start_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// The serving generation: (generation, plugin name, version).
    pub fn serving(&self) -> Option<(u64, String, String)> {
        let serving = self.serving.read().unwrap_or_else(|p| p.into_inner());
        serving
            .as_ref()
            .map(|a| (a.generation, a.plugin.name(), a.plugin.version()))
    }

    /// Every library file seen, with its state.
    pub fn status(&self) -> Vec<SlotStatus> {
        self.catalog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// How many libraries this process has mapped (never unloaded).
    pub fn mapped_libraries(&self) -> usize {
        self.mapped.load(Ordering::SeqCst)
    }

    /// How many libraries this process may map before it refuses reloads.
    pub fn max_mapped_libraries(&self) -> usize {
        self.options.max_mapped
    }

    /// "mapped libraries: n of 64" (refused builds count: they were mapped before they were refused).
    fn mapped_report(&self) -> String {
        format!(
            "mapped libraries: {} of {}",
            self.mapped_libraries(),
            self.options.max_mapped
        )
    }

    /// The folder shadows are made in (`None` for shadows in memory).
    pub fn shadow_dir(&self) -> Option<PathBuf> {
        self.shadows.dir()
    }

    /// Removes the shadow folder now (a signal is ending the process); later reloads are refused.
    /// Returns the folder removed.
    pub fn remove_shadow_dir(&self) -> Option<PathBuf> {
        self.shadows.remove()
    }

    /// Cancels the calls in flight, then drops the serving instance (closing its index). Later calls
    /// get `PLUGIN_UNAVAILABLE`.
    pub fn shutdown(&self) {
        let _gate = self.gate.lock().unwrap_or_else(|p| p.into_inner());
        let mut serving = self.drain(Duration::ZERO);
        if let Some(active) = serving.take() {
            let generation = active.generation;
            drop(active);
            self.shared.log(
                0,
                LogLevel::Info,
                format!("generation {generation} dropped at shutdown (its index closed)"),
            );
        }
    }
}

impl Drop for PluginHost {
    fn drop(&mut self) {
        self.shutdown();
    }
}
