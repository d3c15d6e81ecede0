//! `sample-host demo`: the scripted tour on the bundled demo corpus, copied to a fresh temporary
//! sessions root: search with all three labels, a citation with the cache figure, and a replay.

use std::io::Write;

use super::{print, start_host_in, CommandError, Options};
use crate::chat::plugin::PluginServices;
use crate::chat::ChatEnv;
use crate::cli::ModelArgs;
use crate::demo::{self, DemoCorpus};
use crate::ShadowPlace;

/// Runs the tour. Exit status 0 when every step showed what it should.
pub fn run(options: &Options, model: &ModelArgs, out: &mut dyn Write) -> Result<i32, CommandError> {
    if options.sessions.is_some() {
        return Err(CommandError::Usage(
            "demo writes its own corpus to a temporary folder; it takes no --sessions".into(),
        ));
    }
    let model = super::chat::model_from(model)?;
    let corpus = DemoCorpus::create()
        .map_err(|e| CommandError::Demo(format!("writing the demo corpus: {e}")))?;
    let options = Options {
        index: Some(options.index.clone().unwrap_or_else(|| corpus.index_path())),
        // The tour is about its own corpus: the user's other harnesses join only when named.
        no_default_sources: true,
        ..options.clone()
    };
    print(
        out,
        format!(
            "demo corpus: {} sessions in {} (removed when the demo ends)",
            corpus.ids.len(),
            corpus.root().display()
        ),
    )?;
    // It reloads nothing, so no shadow folder; but it lives long enough to change its own sources
    // between calls, so the plugin watches them rather than reusing a one-shot listing.
    let host = start_host_in(&options, corpus.root(), ShadowPlace::Memory, true)?;
    if host.serving().is_none() {
        super::plugins::print_status(&host, false, out)?;
        return Ok(1);
    }
    let services = PluginServices::new(&host);
    let env = ChatEnv::new(host.shared(), &services).with_model(&model);
    let code = demo::tour(env, &corpus.root(), out);
    host.shutdown();
    Ok(code)
}
