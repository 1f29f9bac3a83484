//! Who sent a request and whether they may: the request context every handler receives
//! (listener, peer, authenticated principal) and the control-plane check.
//!
//! Authentication happens on the connection before requests reach the handlers; the handlers
//! only ask questions of the context.

pub(crate) mod authorizer;
pub(crate) mod client;
pub(crate) mod control_plane;
pub(crate) mod sasl;
pub(crate) mod sasl_session;
pub(crate) mod tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use security::SecurityProtocol;

use crate::config::{ConfigError, Listener};

/// The principal of a connection that did not authenticate (Kafka's `User:ANONYMOUS`).
pub(crate) const ANONYMOUS: &str = "ANONYMOUS";

/// How one listener secures its connections: built once per listener at start.
#[derive(Debug)]
pub(crate) struct ListenerSecurity {
    /// The listener's name.
    pub name: Arc<str>,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
    /// The TLS side of SSL and SASL_SSL listeners.
    pub tls: Option<Arc<tls::TlsServer>>,
    /// The SASL side of SASL_PLAINTEXT and SASL_SSL listeners.
    pub sasl: Option<Arc<sasl::SaslConfig>>,
}

impl ListenerSecurity {
    /// Reads the listener's `ssl.*` settings from the broker's properties (`props`).
    pub(crate) fn new(
        listener: &Listener,
        props: &BTreeMap<String, String>,
    ) -> Result<Self, ConfigError> {
        let tls = if listener.protocol.uses_tls() {
            Some(Arc::new(tls::TlsServer::from_config(
                props,
                &listener.name,
            )?))
        } else {
            None
        };
        let sasl = match listener.protocol {
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => Some(Arc::new(
                sasl::SaslConfig::from_config(props, &listener.name)?,
            )),
            SecurityProtocol::Plaintext | SecurityProtocol::Ssl => None,
        };
        Ok(ListenerSecurity {
            name: Arc::from(listener.name.as_str()),
            protocol: listener.protocol,
            tls,
            sasl,
        })
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
