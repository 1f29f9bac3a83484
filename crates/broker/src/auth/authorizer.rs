//! The ACL authorizer (Kafka's `AclAuthorizer`): every broker keeps all ACLs in memory,
//! loaded from the store at start and refreshed from change notifications; CreateAcls and
//! DeleteAcls write the pattern's znode conditionally on its version (re-reading and retrying
//! when another broker wrote first), update the local cache and leave a notification so every
//! other broker re-reads the pattern.
//!
//! The rule itself is pure and lives in `security::acl`; this module owns the cache and the
//! store I/O. The listener is [`listen`]: one child watch on each change store, re-armed with
//! every read, a full reload when the store session is replaced, notifications older than
//! 15 minutes purged (as Kafka's `ZkNodeChangeNotificationListener`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use metastore::WatchedEvent;
use security::acl::{
    AclBinding, AclBindingFilter, AclSet, AuthorizerSettings, Caller, Operation, ResourcePattern,
    ResourceType,
};
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, info, warn};
use znodes::zk_client::{KafkaWatch, KafkaZkClient};

use super::RequestContext;
use crate::context::BrokerContext;

/// How often a conditional write is retried after losing a race (Kafka's `maxUpdateRetries`).
const MAX_UPDATE_RETRIES: usize = 10;
/// The safety-net rescan of the change stores.
const RESCAN_INTERVAL: Duration = Duration::from_secs(60);

/// An error to answer for one binding: Kafka's code and message.
pub(crate) type AclError = (ResponseError, String);

/// The authorizer of one broker.
#[derive(Debug)]
pub(crate) struct Authorizer {
    settings: AuthorizerSettings,
    acls: RwLock<Arc<AclSet>>,
    /// Serializes this broker's own updates (Kafka's `lock`).
    update: tokio::sync::Mutex<()>,
}

impl Authorizer {
    /// An authorizer with no ACLs loaded yet.
    pub(crate) fn new(settings: AuthorizerSettings) -> Self {
        Authorizer {
            settings,
            acls: RwLock::new(Arc::new(AclSet::default())),
            update: tokio::sync::Mutex::new(()),
        }
    }

    fn snapshot(&self) -> Arc<AclSet> {
        Arc::clone(&self.acls.read().unwrap_or_else(|p| p.into_inner()))
    }

    fn set_pattern(
        &self,
        pattern: ResourcePattern,
        entries: BTreeSet<security::acl::AccessControlEntry>,
    ) {
        let mut guard = self.acls.write().unwrap_or_else(|p| p.into_inner());
        if guard.get(&pattern) == Some(&entries)
            || (entries.is_empty() && guard.get(&pattern).is_none())
        {
            return;
        }
        Arc::make_mut(&mut guard).set(pattern, entries);
    }

    /// Creates the ACL paths and reads every stored ACL (replacing the cache).
    pub(crate) async fn load(&self, zk: &KafkaZkClient) -> Result<(), znodes::ZkClientError> {
        zk.create_acl_paths().await?;
        let mut set = AclSet::default();
        let mut count = 0;
        for pattern in zk.get_acl_patterns().await? {
            match zk.get_versioned_acls(&pattern).await {
                Ok(v) => {
                    count += v.entries.len();
                    set.set(pattern, v.entries);
                }
                Err(err @ znodes::ZkClientError::Decode { .. }) => {
                    warn!(error = %err, "ignoring an unreadable ACL znode");
                }
                Err(err) => return Err(err),
            }
        }
        *self.acls.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(set);
        info!(acls = count, "loaded ACLs");
        Ok(())
    }

    /// Re-reads one pattern (a change notification named it).
    async fn refresh(&self, zk: &KafkaZkClient, pattern: &ResourcePattern) {
        let _guard = self.update.lock().await;
        match zk.get_versioned_acls(pattern).await {
            Ok(v) => {
                debug!(%pattern, acls = v.entries.len(), "ACL change notification");
                self.set_pattern(pattern.clone(), v.entries);
            }
            Err(err) => {
                warn!(%pattern, error = %err, "cannot read ACLs after a change notification")
            }
        }
    }

    /// Whether the request's principal may do `operation` on the resource.
    pub(crate) fn authorize(
        &self,
        rctx: &RequestContext,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let principal = format!("User:{}", rctx.principal);
        let host = rctx.peer.ip().to_string();
        let allowed = self.snapshot().authorize(
            &self.settings,
            Caller {
                principal: &principal,
                host: &host,
            },
            operation,
            resource_type,
            name,
        );
        if !allowed {
            debug!(
                principal, host, operation = operation.name(), resource_type = resource_type.name(), name,
                "Principal = {principal} is Denied Operation = {} from host = {host} on resource = {}:LITERAL:{name}",
                operation.pascal(), resource_type.pascal()
            );
        }
        allowed
    }

    /// DescribeAcls: every binding the filter selects.
    pub(crate) fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        self.snapshot().matching(filter)
    }

    /// CreateAcls: one result per binding, in order.
    pub(crate) async fn create(
        &self,
        zk: &KafkaZkClient,
        bindings: &[AclBinding],
    ) -> Vec<Result<(), AclError>> {
        let mut results: Vec<Option<Result<(), AclError>>> = vec![None; bindings.len()];
        let mut by_pattern: BTreeMap<ResourcePattern, Vec<usize>> = BTreeMap::new();
        for (i, binding) in bindings.iter().enumerate() {
            match binding.validate() {
                Ok(()) => by_pattern
                    .entry(binding.pattern.clone())
                    .or_default()
                    .push(i),
                Err(err) => {
                    results[i] = Some(Err((ResponseError::InvalidRequest, err.0)));
                }
            }
        }
        let _guard = self.update.lock().await;
        for (pattern, indexes) in by_pattern {
            let new: Vec<_> = indexes.iter().map(|&i| bindings[i].entry.clone()).collect();
            let outcome = self
                .update_pattern(zk, &pattern, |current| {
                    let mut next = current.clone();
                    next.extend(new.iter().cloned());
                    next
                })
                .await;
            for i in indexes {
                results[i] = Some(outcome.clone());
            }
        }
        results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect()
    }

    /// DeleteAcls: per filter, the bindings it deleted (each with its error, if the write
    /// failed).
    pub(crate) async fn delete(
        &self,
        zk: &KafkaZkClient,
        filters: &[AclBindingFilter],
    ) -> Vec<Vec<(AclBinding, Option<AclError>)>> {
        let mut out: Vec<Vec<(AclBinding, Option<AclError>)>> = vec![Vec::new(); filters.len()];
        let _guard = self.update.lock().await;
        let mut patterns: BTreeSet<ResourcePattern> = self.snapshot().patterns().cloned().collect();
        for filter in filters {
            patterns.extend(filter.exact_patterns());
        }
        for pattern in patterns {
            let matching: Vec<usize> = (0..filters.len())
                .filter(|&i| filters[i].pattern.matches(&pattern))
                .collect();
            if matching.is_empty() {
                continue;
            }
            // Which filter deleted each entry: the first that selects it (as Kafka).
            let mut removed: BTreeMap<security::acl::AccessControlEntry, usize> = BTreeMap::new();
            let outcome = self
                .update_pattern(zk, &pattern, |current| {
                    removed.clear();
                    let mut next = current.clone();
                    for entry in current {
                        if let Some(&i) =
                            matching.iter().find(|&&i| filters[i].entry.matches(entry))
                        {
                            removed.insert(entry.clone(), i);
                            next.remove(entry);
                        }
                    }
                    next
                })
                .await;
            for (entry, i) in removed {
                out[i].push((
                    AclBinding {
                        pattern: pattern.clone(),
                        entry,
                    },
                    outcome.clone().err(),
                ));
            }
        }
        out
    }

    /// Kafka's `updateResourceAcls`: computes the new entries from the current ones, writes
    /// them conditionally, re-reads and retries when another writer won; on success updates
    /// the cache and, when something changed, leaves a change notification.
    async fn update_pattern(
        &self,
        zk: &KafkaZkClient,
        pattern: &ResourcePattern,
        mut next: impl FnMut(
            &BTreeSet<security::acl::AccessControlEntry>,
        ) -> BTreeSet<security::acl::AccessControlEntry>,
    ) -> Result<(), AclError> {
        let store_error = |err: znodes::ZkClientError| {
            (
                ResponseError::UnknownServerError,
                format!("cannot update the ACLs of {pattern}: {err}"),
            )
        };
        let mut current = zk.get_versioned_acls(pattern).await.map_err(store_error)?;
        for attempt in 0..=MAX_UPDATE_RETRIES {
            let entries = next(&current.entries);
            if entries == current.entries {
                self.set_pattern(pattern.clone(), entries);
                return Ok(());
            }
            match zk
                .conditional_set_acls(pattern, &entries, current.version)
                .await
                .map_err(store_error)?
            {
                Some(_) => {
                    info!(%pattern, acls = entries.len(), "updated ACLs");
                    self.set_pattern(pattern.clone(), entries);
                    zk.create_acl_change_notification(pattern)
                        .await
                        .map_err(store_error)?;
                    return Ok(());
                }
                None => {
                    debug!(%pattern, attempt, "ACL znode changed under us; reading it again");
                    tokio::time::sleep(Duration::from_millis(20 + 10 * attempt as u64)).await;
                    current = zk.get_versioned_acls(pattern).await.map_err(store_error)?;
                }
            }
        }
        Err((
            ResponseError::UnknownServerError,
            format!("Failed to update ACLs for {pattern} after trying a maximum of {MAX_UPDATE_RETRIES} times"),
        ))
    }
}

/// Runs the change listener until shutdown (only started with an authorizer).
pub(crate) async fn listen(ctx: Arc<BrokerContext>, mut shutdown: watch::Receiver<bool>) {
    let Some(authorizer) = ctx.authorizer.clone() else {
        return;
    };
    let mut first = true;
    loop {
        let zk = ctx.zk();
        let session = zk.session_id();
        let fired = Arc::new(Fired::default());
        let forwarder = tokio::spawn(forward_acl_watches(
            zk.subscribe_watches(),
            Arc::clone(&fired),
        ));
        // What was there before the (re)load is already in the cache.
        let mut seen: [Option<u64>; 2] = [None, None];
        for (i, extended) in [false, true].into_iter().enumerate() {
            if let Ok(changes) = zk.get_acl_changes(extended, true).await {
                seen[i] = changes.last().map(|(seq, _)| *seq);
            }
        }
        if !first {
            // A new session: anything may have changed while the old one was gone.
            if let Err(err) = authorizer.load(&zk).await {
                warn!(error = %err, "cannot reload ACLs on the new store session");
            }
        }
        first = false;
        loop {
            tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => {
                    forwarder.abort();
                    return;
                }
                _ = tokio::time::sleep(RESCAN_INTERVAL) => {}
                _ = fired.notify.notified() => {}
            }
            if fired.session_ended.load(Ordering::SeqCst) {
                break;
            }
            for (i, extended) in [false, true].into_iter().enumerate() {
                match zk.get_acl_changes(extended, true).await {
                    Ok(changes) => {
                        let before = seen[i];
                        for (seq, child) in changes.iter().filter(|(seq, _)| Some(*seq) > before) {
                            seen[i] = Some(*seq);
                            match zk.get_acl_change(extended, child).await {
                                Ok(Some((Some(pattern), _))) => {
                                    authorizer.refresh(&zk, &pattern).await
                                }
                                Ok(Some((None, _))) => {
                                    warn!(notification = %child, "ignoring an unreadable ACL change notification")
                                }
                                Ok(None) => {}
                                Err(err) => {
                                    debug!(notification = %child, error = %err, "cannot read an ACL change notification")
                                }
                            }
                        }
                    }
                    Err(err) => debug!(error = %err, "cannot list ACL change notifications"),
                }
                let cutoff =
                    crate::data_plane::now_ms() - crate::config_changes::CHANGE_EXPIRATION_MS;
                if let Err(err) = zk.purge_acl_changes_before(extended, cutoff).await {
                    debug!(error = %err, "cannot purge ACL change notifications");
                }
            }
        }
        while ctx.zk().session_id() == session {
            tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => return,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    }
}

#[derive(Debug, Default)]
struct Fired {
    notify: Notify,
    session_ended: AtomicBool,
}

async fn forward_acl_watches(mut watches: mpsc::Receiver<WatchedEvent>, fired: Arc<Fired>) {
    while let Some(event) = watches.recv().await {
        if let KafkaWatch::Other(path) = KafkaWatch::classify(&event) {
            if path == znodes::acls::literal_changes() || path == znodes::acls::extended_changes() {
                fired.notify.notify_one();
            }
        }
    }
    fired.session_ended.store(true, Ordering::SeqCst);
    fired.notify.notify_one();
}
