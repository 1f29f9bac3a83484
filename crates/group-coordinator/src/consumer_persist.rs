//! KIP-848 groups kept in `__consumer_offsets` as Kafka keeps them: after every change the
//! coordinator writes the records that differ from those it wrote last
//! ([`crate::consumer_records::diff`]); a coordinator that takes an offsets partition over
//! rebuilds its consumer groups from the replayed records
//! ([`CoordinatorCore::load_consumer_groups`]), members, epochs and assignments included.

use std::collections::BTreeMap;

use crate::consumer::ConsumerGroup;
use crate::consumer_records::{self, GroupRecords, RecordWrite};
use crate::core::{CoordinatorCore, Group, Output};

impl CoordinatorCore {
    /// The records to append for `group_id` now (empty: nothing changed), remembered as
    /// written. A group that is gone, or no longer a consumer group, gets tombstones.
    pub(crate) fn consumer_group_writes(&mut self, group_id: &str) -> Vec<RecordWrite> {
        let now = match self.groups.get(group_id) {
            Some(Group::Consumer(group)) => {
                consumer_records::encode(group_id, &group.to_records_state(&self.topics))
            }
            _ => GroupRecords::new(),
        };
        let before = self.consumer_written.get(group_id);
        if before.is_none() && now.is_empty() {
            return Vec::new();
        }
        let writes = consumer_records::diff(before.unwrap_or(&GroupRecords::new()), &now);
        if now.is_empty() {
            self.consumer_written.remove(group_id);
        } else {
            self.consumer_written.insert(group_id.to_owned(), now);
        }
        writes
    }

    /// Queues [`Output::ConsumerGroupRecords`] for every consumer group whose records changed
    /// (and tombstones for those that are gone).
    pub fn persist_consumer_groups(&mut self) {
        let ids: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, g)| matches!(g, Group::Consumer(_)))
            .map(|(id, _)| id.clone())
            .chain(self.consumer_written.keys().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for group_id in ids {
            let records = self.consumer_group_writes(&group_id);
            if !records.is_empty() {
                self.outbox
                    .push(Output::ConsumerGroupRecords { group_id, records });
            }
        }
    }

    /// Adds the KIP-848 groups of an offsets partition this coordinator now leads, from the
    /// live records of its log (group -> key -> value). Each resumes with its members,
    /// epochs and assignments, every member's session restarting at `now_ms`. A group whose
    /// records cannot be read is skipped with a warning (its members rejoin).
    pub fn load_consumer_groups(&mut self, now_ms: u64, groups: BTreeMap<String, GroupRecords>) {
        for (group_id, records) in groups {
            match consumer_records::decode(&records) {
                Ok(state) => {
                    let group = ConsumerGroup::from_records_state(
                        state,
                        &self.topics,
                        now_ms,
                        self.config.consumer_session_timeout_ms,
                        &self.config.consumer_assignors,
                    );
                    self.groups.insert(group_id.clone(), Group::Consumer(group));
                    self.consumer_written.insert(group_id, records);
                }
                Err(err) => {
                    tracing::warn!(group_id, %err, "cannot resume a consumer group from its records")
                }
            }
        }
    }
}
