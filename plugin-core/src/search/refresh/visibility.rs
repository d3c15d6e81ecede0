//! Relabelling after a change of the surface: documents whose label a later replacement changed are
//! updated in place rather than re-inserted.

use super::*;

impl Engine {
    /// Recomputes every row's visibility: a live row is visible unless its disk copy conflicts; a disk row
    /// is visible unless its session is live or conflicts. Writes only rows that changed.
    pub(super) fn update_visibility(
        &mut self,
        listing: &[ListedSession],
        live: &[LiveSession],
        generation: u64,
    ) -> Result<bool, PluginError> {
        let conflicted: HashSet<String> = conflicts(listing, live)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let live_ids: HashSet<String> = live.iter().map(|s| s.header.id.to_string()).collect();
        // Only live rows ask whether their session also lists (none, in a process without live
        // sessions).
        let any_live = self.rows.values().any(|r| r.source == Source::Live);
        let listed_ids: HashSet<&str> = if any_live {
            listing.iter().map(|l| l.header.id.as_str()).collect()
        } else {
            HashSet::new()
        };
        let mut updates = Vec::new();
        for row in self.rows.values() {
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
                updates.push((row.sid, v));
            }
        }
        if updates.is_empty() {
            return Ok(false);
        }
        store::set_visibility(self.conn()?, &updates, generation).map_err(index_failed)?;
        for (sid, v) in updates {
            if let Some(row) = self.rows.values_mut().find(|r| r.sid == sid) {
                row.visible = v.visible;
                row.is_live = v.is_live;
                row.is_persisted = v.is_persisted;
            }
        }
        Ok(true)
    }
}
