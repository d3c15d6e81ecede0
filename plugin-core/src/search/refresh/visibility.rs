//! Relabelling after a change of the surface: documents whose label a later replacement changed are
//! updated in place rather than re-inserted.

use super::*;

impl Engine {
    /// Recomputes every row's visibility: a live row is visible unless its disk copy conflicts; a disk row
    /// is visible unless its session is live or conflicts. Writes only rows that changed. `narrow`: only
    /// the rows at these paths and the live rows can have changed (the live sessions and the conflicts
    /// are those of the last comparison), so only they are looked at.
    pub(super) fn update_visibility(
        &mut self,
        listing: &[ListedSession],
        live: &[LiveSession],
        conflicted: &[(String, PathBuf)],
        narrow: Option<&[PathBuf]>,
        generation: u64,
    ) -> Result<bool, PluginError> {
        let conflicted: HashSet<&str> = conflicted.iter().map(|(id, _)| id.as_str()).collect();
        let live_ids: HashSet<String> = live.iter().map(|s| s.header.id.to_string()).collect();
        let candidates: Vec<(&RowKey, &SessionRow)> = match narrow {
            Some(paths) => {
                let persisted = paths.iter().map(|p| RowKey::Persisted(p.clone()));
                let live_keys = live_ids.iter().map(|id| RowKey::Live(id.clone()));
                persisted
                    .chain(live_keys)
                    .filter_map(|k| self.rows.get_key_value(&k))
                    .collect()
            }
            None => self.rows.iter().collect(),
        };
        // Only live rows ask whether their session also lists (none, in a process without live
        // sessions).
        let any_live = candidates.iter().any(|(_, r)| r.source == Source::Live);
        let listed_ids: HashSet<&str> = if any_live {
            listing.iter().map(|l| l.header.id.as_str()).collect()
        } else {
            HashSet::new()
        };
        let mut updates = Vec::new();
        for (key, row) in candidates {
            let id = row.header.id.as_str();
            let v = match row.source {
                Source::Live => Visibility {
                    visible: !conflicted.contains(id),
                    is_live: true,
                    is_persisted: listed_ids.contains(id),
                },
                Source::Persisted => Visibility {
                    visible: !live_ids.contains(id) && !conflicted.contains(id),
                    is_live: false,
                    is_persisted: true,
                },
            };
            if (row.visible, row.is_live, row.is_persisted)
                != (v.visible, v.is_live, v.is_persisted)
            {
                updates.push((key.clone(), row.sid, v));
            }
        }
        if updates.is_empty() {
            return Ok(false);
        }
        let writes: Vec<(i64, Visibility)> = updates.iter().map(|(_, sid, v)| (*sid, *v)).collect();
        store::set_visibility(self.conn()?, &writes, generation).map_err(index_failed)?;
        for (key, _, v) in updates {
            if let Some(row) = self.rows.get_mut(&key) {
                row.visible = v.visible;
                row.is_live = v.is_live;
                row.is_persisted = v.is_persisted;
            }
        }
        Ok(true)
    }
}
