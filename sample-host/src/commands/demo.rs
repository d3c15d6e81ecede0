//! `sample-host demo`: the scripted tour on the bundled demo corpus, copied to a fresh temporary
//! sessions root: search with all three labels, a citation with the cache figure, and a replay.

use std::io::Write;

use super::{print, start_long_lived_host, CommandError, Options};
use crate::chat::plugin::PluginServices;
use crate::chat::ChatEnv;
use crate::demo::{self, DemoCorpus};

/// Runs the tour. Exit status 0 when every step showed what it should.
pub fn run(options: &Options, out: &mut dyn Write) -> Result<i32, CommandError> {
    if options.sessions.is_some() {
        return Err(CommandError::Usage(
            "demo writes its own corpus to a temporary folder; it takes no --sessions".into(),
        ));
    }
    let corpus = DemoCorpus::create()
        .map_err(|e| CommandError::Demo(format!("writing the demo corpus: {e}")))?;
    let options = Options {
        index: Some(options.index.clone().unwrap_or_else(|| corpus.index_path())),
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
    let host = start_long_lived_host(&options, corpus.root())?;
    if host.serving().is_none() {
        super::plugins::print_status(&host, false, out)?;
        return Ok(1);
    }
    let services = PluginServices::new(&host);
    let env = ChatEnv::new(host.shared(), &services);
    let code = demo::tour(env, &corpus.root(), out);
    host.shutdown();
    Ok(code)
}
