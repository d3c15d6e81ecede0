//! Default locations, so a fresh user needs no flags (XDG base directories on Linux).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::loader::plugin_file_name;

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn xdg(var: &str, fallback: &str) -> PathBuf {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(fallback)))
        .unwrap_or_else(std::env::temp_dir)
        .join("dsh-session-search")
}

/// `$XDG_DATA_HOME/dsh-session-search/sessions`.
pub fn default_sessions_dir() -> PathBuf {
    xdg("XDG_DATA_HOME", ".local/share").join("sessions")
}

/// `$HOME/.claude/projects`: Claude Code's transcripts.
pub fn default_claude_projects() -> Option<PathBuf> {
    home().map(|h| h.join(".claude").join("projects"))
}

/// `$HOME/.codex`: Codex's rollouts.
pub fn default_codex_home() -> Option<PathBuf> {
    home().map(|h| h.join(".codex"))
}

/// `$XDG_CACHE_HOME/dsh-session-search/index.sqlite`.
pub fn default_index_path() -> PathBuf {
    xdg("XDG_CACHE_HOME", ".cache").join("index.sqlite")
}

/// Where plugins are loaded from when `--plugins` is not given, and whether only the real plugin's file
/// is to be loaded there. In order: `plugins/` beside the binary; `$XDG_CONFIG_HOME/dsh-session-search/plugins`;
/// else the binary's own folder — where `cargo build` puts the plugin — loading only the plugin's file
/// name, because that folder also holds the test fixture libraries.
pub fn default_plugins_dir() -> (PathBuf, Option<OsString>) {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    if let Some(dir) = exe_dir
        .as_ref()
        .map(|d| d.join("plugins"))
        .filter(|d| d.is_dir())
    {
        return (dir, None);
    }
    let config = xdg("XDG_CONFIG_HOME", ".config").join("plugins");
    if config.is_dir() {
        return (config, None);
    }
    (
        exe_dir.unwrap_or_else(|| PathBuf::from(".")),
        Some(plugin_file_name().into_os_string()),
    )
}
