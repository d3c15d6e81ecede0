//! The plugin's search as the search benches open it: over a sessions root on disk alone (no live
//! sessions), its index at a path of its own, the rest of the configuration the bench's.

use std::path::Path;
use std::sync::Arc;

use host_api::abi::host::DiskOnlyHost;
use plugin_core::config::Config;
use plugin_core::corpus::Corpus;
use plugin_core::search::Search;

/// The search and the corpus it reads: `config` with its index at `index` and its sessions root
/// `root`.
pub fn open(root: &Path, index: &Path, config: Config) -> Result<(Search, Corpus), String> {
    let host = Arc::new(
        DiskOnlyHost {
            sessions_root: Some(root.display().to_string()),
        }
        .boxed(),
    );
    let config = Config {
        index_path: Some(index.to_path_buf()),
        sessions_root: Some(root.to_path_buf()),
        ..config
    };
    let search = Search::open(&config, index, host.clone()).map_err(|e| format!("{e:?}"))?;
    Ok((search, Corpus::new(host, Some(root.to_path_buf()))))
}
