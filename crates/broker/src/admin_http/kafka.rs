//! How the admin listener (the console, `/metrics`) asks the cluster anything: by Kafka
//! requests, through the same code paths Kafka clients use, never through a second model.
//!
//! A request to a broker of this process (the broker of `gregor server`, every broker of a
//! dev cluster) goes straight to that broker's request handlers (`handlers::handle`, the
//! one `match` every Kafka request goes through) with a [`RequestContext`] carrying the
//! console user's principal, so whatever the handlers check for a Kafka client they check
//! for the console user. A request to a broker of another process goes over TCP with the
//! `client` crate, to the address the metadata cache lists.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Request, StrBytes};
use model::BrokerId;

use crate::auth::RequestContext;
use crate::context::BrokerContext;
use crate::handlers;
use crate::metadata_cache::Snapshot;

/// The `client_id` of the admin listener's requests.
pub(crate) const CLIENT_ID: &str = "gregor-console";

/// A request the admin listener sends, at a fixed version (the request structs are built
/// for it), with the way back from the handlers' answer.
pub(crate) trait AdminRequest: Request + Into<RequestKind> {
    /// The version the request is built for and sent at.
    const VERSION: i16;
    /// The response of this request's API, if `kind` is one.
    fn response(kind: ResponseKind) -> Option<Self::Response>;
}

macro_rules! admin_requests {
    ($($request:ident => $variant:ident($response:ident) @ $version:literal),* $(,)?) => {
        $(impl AdminRequest for $request {
            const VERSION: i16 = $version;
            fn response(kind: ResponseKind) -> Option<$response> {
                match kind {
                    ResponseKind::$variant(response) => Some(response),
                    _ => None,
                }
            }
        })*
    };
}

admin_requests! {
    MetadataRequest => Metadata(MetadataResponse) @ 12,
    DescribeConfigsRequest => DescribeConfigs(DescribeConfigsResponse) @ 4,
    DescribeLogDirsRequest => DescribeLogDirs(DescribeLogDirsResponse) @ 4,
    ListOffsetsRequest => ListOffsets(ListOffsetsResponse) @ 6,
    ListGroupsRequest => ListGroups(ListGroupsResponse) @ 4,
    DescribeGroupsRequest => DescribeGroups(DescribeGroupsResponse) @ 5,
    OffsetFetchRequest => OffsetFetch(OffsetFetchResponse) @ 7,
    OffsetCommitRequest => OffsetCommit(OffsetCommitResponse) @ 8,
    CreateTopicsRequest => CreateTopics(CreateTopicsResponse) @ 7,
    CreatePartitionsRequest => CreatePartitions(CreatePartitionsResponse) @ 3,
    DeleteTopicsRequest => DeleteTopics(DeleteTopicsResponse) @ 6,
    IncrementalAlterConfigsRequest => IncrementalAlterConfigs(IncrementalAlterConfigsResponse) @ 1,
    ElectLeadersRequest => ElectLeaders(ElectLeadersResponse) @ 2,
    ListPartitionReassignmentsRequest => ListPartitionReassignments(ListPartitionReassignmentsResponse) @ 0,
}

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    /// The broker is neither in this process nor in the metadata cache's live brokers.
    #[error("broker {0} is not available")]
    BrokerNotAvailable(BrokerId),
    /// No broker of this process is running.
    #[error("no broker of this process is running")]
    NoBroker,
    /// The request to another process failed.
    #[error("{0}")]
    Client(#[from] client::ClientError),
    /// The handlers answered with another API's response (a bug).
    #[error("the broker answered {0:?} with another API's response")]
    WrongResponse(ApiKey),
}

/// Who asks: the console user (or the scraper), and from where.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The authenticated user name (`ANONYMOUS` without authentication).
    pub principal: Arc<str>,
    /// The HTTP client's address.
    pub peer: SocketAddr,
}

/// The brokers the admin listener can reach: those of this process directly, the others
/// over TCP (one cached connection each).
#[derive(Debug)]
pub(crate) struct Cluster {
    local: Vec<Arc<BrokerContext>>,
    remote: tokio::sync::Mutex<HashMap<BrokerId, client::Connection>>,
}

impl Cluster {
    pub(crate) fn new(local: Vec<Arc<BrokerContext>>) -> Cluster {
        Cluster {
            local,
            remote: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The brokers of this process that are still running.
    pub(crate) fn running(&self) -> impl Iterator<Item = &Arc<BrokerContext>> + '_ {
        self.local
            .iter()
            .filter(|ctx| !ctx.stopped.load(Ordering::SeqCst))
    }

    /// A running broker of this process: its metadata cache and store session answer what
    /// any broker can.
    pub(crate) fn any(&self) -> Result<&Arc<BrokerContext>, CallError> {
        self.running().next().ok_or(CallError::NoBroker)
    }

    /// The metadata cache of a running broker of this process.
    pub(crate) fn metadata(&self) -> Result<Arc<Snapshot>, CallError> {
        Ok(self.any()?.metadata_cache.snapshot())
    }

    /// The active controller's id (-1 when unknown).
    pub(crate) fn controller_id(&self) -> BrokerId {
        self.metadata().map(|s| s.controller_id).unwrap_or(-1)
    }

    /// Sends `request` to `broker` as `caller` and returns its response.
    pub(crate) async fn call<R: AdminRequest>(
        &self,
        caller: &Caller,
        broker: BrokerId,
        request: R,
    ) -> Result<R::Response, CallError> {
        let api = ApiKey::try_from(R::KEY).unwrap_or(ApiKey::ApiVersions);
        if let Some(ctx) = self.running().find(|ctx| ctx.broker_id == broker) {
            let header = RequestHeader::default()
                .with_request_api_key(R::KEY)
                .with_request_api_version(R::VERSION)
                .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
            let rctx = RequestContext {
                listener: Arc::from(ctx.config.listener().name.as_str()),
                peer: caller.peer,
                principal: Arc::clone(&caller.principal),
            };
            let kind = crate::groups::PEER
                .scope(
                    caller.peer,
                    handlers::handle(ctx, &rctx, &header, request.into()),
                )
                .await;
            return R::response(kind).ok_or(CallError::WrongResponse(api));
        }
        self.call_remote(broker, request).await
    }

    /// Sends `request` to the active controller.
    pub(crate) async fn call_controller<R: AdminRequest>(
        &self,
        caller: &Caller,
        request: R,
    ) -> Result<R::Response, CallError> {
        let controller = self.controller_id();
        if controller < 0 {
            return Err(CallError::BrokerNotAvailable(controller));
        }
        self.call(caller, controller, request).await
    }

    /// Sends `request` to the coordinator of `group`: the leader of its `__consumer_offsets`
    /// partition (see `crate::groups`).
    pub(crate) async fn call_coordinator<R: AdminRequest>(
        &self,
        caller: &Caller,
        group: &str,
        request: R,
    ) -> Result<R::Response, CallError> {
        let snapshot = self.metadata()?;
        let topic = group_coordinator::log_records::OFFSETS_TOPIC;
        let coordinator = snapshot
            .topics
            .get(topic)
            .and_then(|t| {
                let n = i32::try_from(t.partitions.len()).ok()?;
                let partition = group_coordinator::log_records::partition_for(group, n);
                t.partitions.get(&partition).map(|p| p.leader)
            })
            .unwrap_or(-1);
        if coordinator < 0 {
            return Err(CallError::BrokerNotAvailable(coordinator));
        }
        self.call(caller, coordinator, request).await
    }

    /// The ids of the live brokers of the metadata cache.
    pub(crate) fn live_brokers(&self) -> Vec<BrokerId> {
        self.metadata()
            .map(|s| s.brokers.keys().copied().collect())
            .unwrap_or_default()
    }

    async fn call_remote<R: AdminRequest>(
        &self,
        broker: BrokerId,
        request: R,
    ) -> Result<R::Response, CallError> {
        let snapshot = self.metadata()?;
        let live = snapshot
            .brokers
            .get(&broker)
            .ok_or(CallError::BrokerNotAvailable(broker))?;
        let addr = format!("{}:{}", live.host, live.port);
        let mut remote = self.remote.lock().await;
        if remote.get(&broker).is_none_or(|c| c.addr() != addr) {
            let connection = client::Connection::connect(&addr, CLIENT_ID).await?;
            remote.insert(broker, connection);
        }
        let connection = remote.get_mut(&broker).expect("inserted above");
        match connection.send_version(request, R::VERSION).await {
            Ok(response) => Ok(response),
            Err(err) => {
                // The next request reconnects.
                remote.remove(&broker);
                Err(err.into())
            }
        }
    }
}
