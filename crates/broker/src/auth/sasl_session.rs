//! One connection's SASL state on a SASL_PLAINTEXT or SASL_SSL listener, as Kafka's
//! `SaslServerAuthenticator` runs it: until the client authenticated only ApiVersions,
//! SaslHandshake and SaslAuthenticate are served (anything else closes the connection, as
//! Kafka's "Unexpected Kafka request of type ... during SASL handshake"); a failed
//! authentication answers SASL_AUTHENTICATION_FAILED with Kafka's message, logs
//! `Failed authentication with <ip> (<message>)` and closes the connection.
//!
//! After a v0 SaslHandshake the tokens travel as bare size-prefixed frames; after v1 they
//! come in SaslAuthenticate requests. With `connections.max.reauth.ms` (KIP-152) the answer
//! tells the client its session lifetime; a SaslHandshake on an authenticated connection
//! starts a re-authentication (same mechanism, same principal, as Kafka requires), and a
//! request after the session expired closes the connection.

use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use protocol::request::RequestBody;
use protocol::{decode_request, encode_response, DecodedRequest};
use tracing::{debug, info, warn};

use crate::auth::sasl::{Exchange, Failure, Mechanism, SaslConfig, Step};
use crate::auth::RequestContext;
use crate::context::BrokerContext;

/// What the connection does with a frame.
#[allow(clippy::large_enum_variant)] // the common case; boxing it would cost every request
pub(crate) enum Admit {
    /// Handle this request as usual.
    Serve(DecodedRequest),
    /// Write this frame, then close the connection if `close`.
    Reply {
        /// The encoded answer, size prefix included.
        frame: BytesMut,
        /// Whether the connection closes after it.
        close: bool,
    },
    /// Close the connection without an answer (already logged).
    Close,
}

#[derive(Debug)]
enum State {
    /// Waiting for SaslHandshake (ApiVersions allowed).
    Handshake,
    /// Handshake v1 done: tokens come in SaslAuthenticate requests.
    Authenticate(Exchange),
    /// Handshake v0 done: tokens come as bare frames.
    RawToken(Exchange),
    /// A re-authentication asked for another mechanism: the next SaslAuthenticate fails.
    BadMechanism(String),
    /// Authenticated.
    Done,
}

/// The SASL side of one connection.
#[derive(Debug)]
pub(crate) struct SaslSession {
    config: Arc<SaslConfig>,
    state: State,
    /// The authenticated user and mechanism (kept through a re-authentication).
    authenticated: Option<(String, Mechanism)>,
    /// When the session ends (`connections.max.reauth.ms`).
    expires: Option<Instant>,
}

impl SaslSession {
    /// A connection that has not authenticated yet.
    pub(crate) fn new(config: Arc<SaslConfig>) -> Self {
        SaslSession {
            config,
            state: State::Handshake,
            authenticated: None,
            expires: None,
        }
    }

    /// Decides what happens with the next frame.
    pub(crate) async fn admit(
        &mut self,
        ctx: &BrokerContext,
        rctx: &mut RequestContext,
        frame: Bytes,
    ) -> Admit {
        let peer = rctx.peer;
        if let State::RawToken(exchange) = &mut self.state {
            let result = exchange.step(ctx, &self.config, &frame).await;
            let mechanism = exchange.mechanism();
            return match result {
                Ok(step) => {
                    let message = match step {
                        Step::Challenge(message) => message,
                        Step::Done { message, user } => {
                            self.authenticated(rctx, user, mechanism);
                            message
                        }
                    };
                    let mut out = BytesMut::with_capacity(4 + message.len());
                    out.put_i32(message.len() as i32);
                    out.extend_from_slice(&message);
                    Admit::Reply {
                        frame: out,
                        close: false,
                    }
                }
                Err(failure) => {
                    failed(rctx, &failure);
                    Admit::Close
                }
            };
        }
        let request = match decode_request(frame) {
            Ok(request) => request,
            Err(err) => {
                warn!(%peer, error = %err, "closing connection: cannot decode request");
                ctx.metrics.request_error();
                return Admit::Close;
            }
        };
        if matches!(self.state, State::Done) {
            let handshake = matches!(
                &request.body,
                RequestBody::Supported(RequestKind::SaslHandshake(_))
            );
            if !handshake {
                if self.expires.is_some_and(|at| Instant::now() >= at) {
                    info!(%peer, listener = %rctx.listener, principal = %rctx.principal,
                        "closing connection: its SASL session expired (connections.max.reauth.ms) and the client did not re-authenticate");
                    return Admit::Close;
                }
                return Admit::Serve(request);
            }
        }
        let api_key = request.api_key;
        let version = request.api_version();
        let correlation_id = request.correlation_id();
        let (body, close) = match (request.body, &mut self.state) {
            (RequestBody::Supported(RequestKind::ApiVersions(r)), State::Handshake) => {
                return Admit::Serve(DecodedRequest {
                    header: request.header,
                    api_key,
                    body: RequestBody::Supported(RequestKind::ApiVersions(r)),
                });
            }
            (RequestBody::UnsupportedApiVersions, State::Handshake) => {
                return Admit::Serve(DecodedRequest {
                    header: request.header,
                    api_key,
                    body: RequestBody::UnsupportedApiVersions,
                });
            }
            (
                RequestBody::Supported(RequestKind::SaslHandshake(req)),
                State::Handshake | State::Done,
            ) => {
                let reauth = self.authenticated.clone();
                let names = self
                    .config
                    .mechanism_names()
                    .into_iter()
                    .map(StrBytes::from_static_str)
                    .collect();
                let response = SaslHandshakeResponse::default().with_mechanisms(names);
                match self.config.mechanism(&req.mechanism) {
                    Some(mechanism) => {
                        let exchange = Exchange::new(mechanism);
                        self.state = match reauth {
                            Some((_, previous)) if previous != mechanism => {
                                State::BadMechanism(format!(
                                    "SASL mechanism '{}' requested by client is not supported for re-authentication of mechanism '{}'",
                                    &*req.mechanism,
                                    previous.name()
                                ))
                            }
                            _ if version == 0 => State::RawToken(exchange),
                            _ => State::Authenticate(exchange),
                        };
                        debug!(%peer, mechanism = mechanism.name(), reauthentication = reauth.is_some(), "SASL handshake");
                        (ResponseKind::SaslHandshake(response), false)
                    }
                    None => {
                        info!(%peer, listener = %rctx.listener,
                            "Failed authentication with {} (Unsupported SASL mechanism {})", peer.ip(), &*req.mechanism);
                        (
                            ResponseKind::SaslHandshake(
                                response.with_error_code(
                                    ResponseError::UnsupportedSaslMechanism.code(),
                                ),
                            ),
                            true,
                        )
                    }
                }
            }
            (
                RequestBody::Supported(RequestKind::SaslAuthenticate(req)),
                State::Authenticate(exchange),
            ) => {
                let mechanism = exchange.mechanism();
                match exchange.step(ctx, &self.config, &req.auth_bytes).await {
                    Ok(Step::Challenge(challenge)) => (
                        ResponseKind::SaslAuthenticate(
                            SaslAuthenticateResponse::default().with_auth_bytes(challenge.into()),
                        ),
                        false,
                    ),
                    Ok(Step::Done { message, user }) => match &self.authenticated {
                        Some((previous, _)) if *previous != user => {
                            let failure = Failure {
                                    client: format!(
                                        "Cannot change principals during re-authentication from User.{previous}: User.{user}"
                                    ),
                                    detail: "a different principal".into(),
                                };
                            failed(rctx, &failure);
                            (auth_failed(failure.client), true)
                        }
                        _ => {
                            let lifetime = self.authenticated(rctx, user, mechanism);
                            let mut response =
                                SaslAuthenticateResponse::default().with_auth_bytes(message.into());
                            if version >= 1 {
                                response = response.with_session_lifetime_ms(
                                    lifetime.map_or(0, |d| d.as_millis() as i64),
                                );
                            }
                            (ResponseKind::SaslAuthenticate(response), false)
                        }
                    },
                    Err(failure) => {
                        failed(rctx, &failure);
                        (auth_failed(failure.client), true)
                    }
                }
            }
            (
                RequestBody::Supported(RequestKind::SaslAuthenticate(_)),
                State::BadMechanism(why),
            ) => {
                let failure = Failure {
                    client: why.clone(),
                    detail: why.clone(),
                };
                failed(rctx, &failure);
                (auth_failed(failure.client), true)
            }
            _ => {
                warn!(%peer, listener = %rctx.listener,
                    "closing connection: Unexpected Kafka request of type {api_key:?} during SASL authentication");
                return Admit::Close;
            }
        };
        match encode_response(api_key, version, correlation_id, &body) {
            Ok(frame) => Admit::Reply { frame, close },
            Err(err) => {
                tracing::error!(%peer, error = %err, "closing connection: cannot encode response");
                Admit::Close
            }
        }
    }

    /// Waits `connection.failed.authentication.delay.ms` before the connection closes after a
    /// refusal (KIP-306: slows down a client guessing passwords, and lets the client read the
    /// answer before the close; kafka-python drops an answer that arrives with the close).
    pub(crate) async fn delay_close(&self) {
        tokio::time::sleep(self.config.failed_authentication_delay).await;
    }

    /// `user` authenticated with `mechanism`; returns the session lifetime.
    fn authenticated(
        &mut self,
        rctx: &mut RequestContext,
        user: String,
        mechanism: Mechanism,
    ) -> Option<std::time::Duration> {
        let lifetime = self.config.session_lifetime(mechanism);
        self.expires = lifetime.map(|d| Instant::now() + d);
        debug!(peer = %rctx.peer, %user, mechanism = mechanism.name(), "SASL authentication succeeded");
        rctx.principal = Arc::from(user.as_str());
        self.authenticated = Some((user, mechanism));
        self.state = State::Done;
        lifetime
    }
}

fn auth_failed(message: String) -> ResponseKind {
    ResponseKind::SaslAuthenticate(
        SaslAuthenticateResponse::default()
            .with_error_code(ResponseError::SaslAuthenticationFailed.code())
            .with_error_message(Some(StrBytes::from_string(message))),
    )
}

/// Kafka's `Selector` line for a failed authentication, plus the broker-side reason.
fn failed(rctx: &RequestContext, failure: &Failure) {
    info!(peer = %rctx.peer, listener = %rctx.listener, reason = %failure.detail,
        "Failed authentication with {} ({})", rctx.peer.ip(), failure.client);
}
