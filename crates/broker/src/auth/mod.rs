//! Who sent a request and whether they may: the request context every handler receives
//! (listener, peer, authenticated principal) and the control-plane check.
//!
//! Authentication happens on the connection before requests reach the handlers; the handlers
//! only ask questions of the context.

pub(crate) mod control_plane;

use std::net::SocketAddr;
use std::sync::Arc;

use security::SecurityProtocol;

use crate::config::Listener;

/// The principal of a connection that did not authenticate (Kafka's `User:ANONYMOUS`).
pub(crate) const ANONYMOUS: &str = "ANONYMOUS";

/// How one listener secures its connections: built once per listener at start.
#[derive(Debug)]
pub(crate) struct ListenerSecurity {
    /// The listener's name.
    pub name: Arc<str>,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
}

impl ListenerSecurity {
    pub(crate) fn new(listener: &Listener) -> Self {
        ListenerSecurity {
            name: Arc::from(listener.name.as_str()),
            protocol: listener.protocol,
        }
    }
}

/// What the handlers know about the connection a request came on.
#[derive(Debug, Clone)]
pub(crate) struct RequestContext {
    /// The listener's name (`PLAINTEXT`, `INTERNAL`, ...).
    pub listener: Arc<str>,
    /// The client's address.
    pub peer: SocketAddr,
    /// The authenticated user name (the `User:` principal's name).
    pub principal: Arc<str>,
}

impl RequestContext {
    /// A connection on `listener` from `peer` that has not authenticated.
    pub(crate) fn anonymous(listener: Arc<str>, peer: SocketAddr) -> Self {
        RequestContext {
            listener,
            peer,
            principal: Arc::from(ANONYMOUS),
        }
    }
}
