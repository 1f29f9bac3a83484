//! TLS on SSL and SASL_SSL listeners, with rustls (no OpenSSL): Kafka's `ssl.*` keys in PEM
//! form, per listener (`listener.name.<l>.ssl.*` wins over `ssl.*`).
//!
//! - `ssl.keystore.type=PEM` (JKS and PKCS12 are refused with a hint to convert), with either
//!   `ssl.keystore.location` (a PEM file holding the private key and the certificate chain)
//!   or `ssl.keystore.certificate.chain` + `ssl.keystore.key` (PEM text, read as Kafka's
//!   PEM parser reads it: `security::pem`). An `ENCRYPTED PRIVATE KEY` opens with
//!   `ssl.key.password`.
//! - `ssl.truststore.type=PEM`, `ssl.truststore.location` or `ssl.truststore.certificates`:
//!   the CAs client certificates must chain to.
//! - `ssl.client.auth=none|requested|required`; the principal of a client certificate is its
//!   subject DN (RFC 2253) through `ssl.principal.mapping.rules`.
//! - `ssl.enabled.protocols` (default `TLSv1.2,TLSv1.3`).
//! - Certificates given by file are reloaded when the files change (checked every
//!   [`RELOAD_CHECK_INTERVAL`]); connections already open keep their session.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer,
};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use security::principal::PrincipalMapper;
use tracing::{info, warn};

use tokio::net::TcpStream;

use crate::auth::RequestContext;
use crate::config::ConfigError;

/// How long a client has to finish the TLS handshake before its connection is closed.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often file-based certificates are checked for changes.
pub(crate) const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// Asked for; a client without one is `User:ANONYMOUS`.
    Requested,
    /// A client without a valid certificate fails the handshake.
    Required,
}

/// The TLS side of one listener, built at start.
#[derive(Debug)]
pub(crate) struct TlsServer {
    /// The rustls configuration (its certificate resolver reloads the keystore).
    pub config: Arc<ServerConfig>,
    /// `ssl.principal.mapping.rules`.
    pub mapper: PrincipalMapper,
    keystore: Arc<Keystore>,
}

impl TlsServer {
    /// Reads the listener's `ssl.*` settings from `props`.
    pub(crate) fn from_config(
        props: &BTreeMap<String, String>,
        listener: &str,
    ) -> Result<TlsServer, ConfigError> {
        let get = |key: &str| listener_prop(props, listener, key);
        let bad = |key: &str, value: &str, reason: &str| ConfigError::InvalidValue {
            key: key.to_owned(),
            value: value.to_owned(),
            reason: format!("listener {listener}: {reason}"),
        };
        for key in ["ssl.keystore.type", "ssl.truststore.type"] {
            if let Some(kind) = get(key) {
                if !kind.eq_ignore_ascii_case("PEM") {
                    return Err(bad(
                        key,
                        kind,
                        "only PEM is supported (convert with `keytool -importkeystore` and `openssl pkcs12 -nodes`)",
                    ));
                }
            }
        }
        let source = match (
            get("ssl.keystore.location"),
            get("ssl.keystore.certificate.chain"),
            get("ssl.keystore.key"),
        ) {
            (Some(path), None, None) => KeySource::File(PathBuf::from(path)),
            (None, Some(chain), Some(key)) => KeySource::Inline {
                chain: chain.to_owned(),
                key: key.to_owned(),
            },
            (None, None, None) => {
                return Err(bad(
                    "ssl.keystore.location",
                    "",
                    "an SSL listener needs ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key",
                ))
            }
            _ => {
                return Err(bad(
                    "ssl.keystore.location",
                    get("ssl.keystore.location").unwrap_or(""),
                    "give either ssl.keystore.location or both ssl.keystore.certificate.chain and ssl.keystore.key",
                ))
            }
        };
        let password = get("ssl.key.password").map(str::to_owned);
        let keystore = Arc::new(
            Keystore::load(source, password)
                .map_err(|e| bad(e.key, &e.shown_value(&get), &e.reason))?,
        );
        let client_auth = match get("ssl.client.auth")
            .unwrap_or("none")
            .to_ascii_lowercase()
            .as_str()
        {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            other => {
                return Err(bad(
                    "ssl.client.auth",
                    other,
                    "expected none, requested or required",
                ))
            }
        };
        let versions = protocol_versions(get("ssl.enabled.protocols")).map_err(|reason| {
            bad(
                "ssl.enabled.protocols",
                get("ssl.enabled.protocols").unwrap_or(""),
                &reason,
            )
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&versions)
            .map_err(|e| bad("ssl.enabled.protocols", "", &e.to_string()))?;
        let builder = match client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            ClientAuth::Requested | ClientAuth::Required => {
                let roots = truststore(props, listener)
                    .map_err(|e| bad(e.key, &e.shown_value(&get), &e.reason))?;
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if client_auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| bad("ssl.truststore.location", "", &e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config =
            builder.with_cert_resolver(Arc::clone(&keystore) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols.clear();
        let mapper = match get("ssl.principal.mapping.rules") {
            Some(rules) => PrincipalMapper::parse(rules)
                .map_err(|e| bad("ssl.principal.mapping.rules", rules, &e.to_string()))?,
            None => PrincipalMapper::default(),
        };
        Ok(TlsServer {
            config: Arc::new(config),
            mapper,
            keystore,
        })
    }

    /// Reloads the keystore files when they changed, until `shutdown` turns true.
    pub(crate) async fn watch_files(
        self: Arc<Self>,
        listener: Arc<str>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        if !matches!(self.keystore.source, KeySource::File(_)) {
            return;
        }
        loop {
            tokio::select! {
                _ = tokio::time::sleep(RELOAD_CHECK_INTERVAL) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
            let keystore = Arc::clone(&self.keystore);
            let listener = Arc::clone(&listener);
            let _ =
                tokio::task::spawn_blocking(move || keystore.reload_if_changed(&listener)).await;
        }
    }
}

/// Runs the TLS handshake on an accepted connection. With a client certificate the principal
/// is its subject through `ssl.principal.mapping.rules`; without one it stays `ANONYMOUS`.
/// `None` (logged) when the handshake fails or the certificate maps to no principal.
pub(crate) async fn accept(
    tls: &TlsServer,
    stream: TcpStream,
    mut rctx: RequestContext,
) -> Option<(tokio_rustls::server::TlsStream<TcpStream>, RequestContext)> {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(&tls.config));
    let peer = rctx.peer;
    let listener = Arc::clone(&rctx.listener);
    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(err)) => {
            info!(%peer, %listener, error = %err, "Failed authentication with {} (SSL handshake failed)", peer.ip());
            return None;
        }
        Err(_) => {
            info!(%peer, %listener, timeout_ms = HANDSHAKE_TIMEOUT.as_millis() as u64, "closing connection: TLS handshake not finished in time");
            return None;
        }
    };
    let cert = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first());
    if let Some(cert) = cert {
        let Some(dn) = subject_dn(cert) else {
            warn!(%peer, %listener, "closing connection: cannot read the client certificate's subject");
            return None;
        };
        match tls.mapper.name(&dn) {
            Ok(name) => rctx.principal = Arc::from(name.as_str()),
            Err(err) => {
                warn!(%peer, %listener, error = %err, "closing connection: the client certificate maps to no principal (ssl.principal.mapping.rules)");
                return None;
            }
        }
    }
    Some((stream, rctx))
}

/// A listener's key: `listener.name.<lower-case name>.<key>`, else `<key>`.
pub(crate) fn listener_prop<'a>(
    props: &'a BTreeMap<String, String>,
    listener: &str,
    key: &str,
) -> Option<&'a str> {
    props
        .get(&format!(
            "listener.name.{}.{key}",
            listener.to_ascii_lowercase()
        ))
        .or_else(|| props.get(key))
        .map(String::as_str)
}

fn protocol_versions(
    value: Option<&str>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let mut versions = Vec::new();
    for name in value
        .unwrap_or("TLSv1.2,TLSv1.3")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        match name {
            "TLSv1.2" => versions.push(&rustls::version::TLS12),
            "TLSv1.3" => versions.push(&rustls::version::TLS13),
            "TLSv1" | "TLSv1.1" | "SSLv3" => {
                return Err(format!(
                    "{name} is not supported (only TLSv1.2 and TLSv1.3)"
                ))
            }
            other => return Err(format!("unknown protocol {other}")),
        }
    }
    if versions.is_empty() {
        return Err("no protocol enabled".into());
    }
    Ok(versions)
}

/// A keystore or truststore setting that does not load: the key to name, and why.
#[derive(Debug)]
struct StoreError {
    key: &'static str,
    reason: String,
}

impl StoreError {
    fn new(key: &'static str, reason: impl std::fmt::Display) -> StoreError {
        StoreError {
            key,
            reason: reason.to_string(),
        }
    }

    /// The value to show with the error: a file's path, never a key's PEM text.
    fn shown_value<'a>(&self, get: &impl Fn(&str) -> Option<&'a str>) -> String {
        if self.key.ends_with(".location") {
            get(self.key).unwrap_or("").to_owned()
        } else {
            "(PEM text, not shown)".to_owned()
        }
    }
}

fn truststore(
    props: &BTreeMap<String, String>,
    listener: &str,
) -> Result<RootCertStore, StoreError> {
    let get = |key: &str| listener_prop(props, listener, key);
    let (key, certs) = match (
        get("ssl.truststore.location"),
        get("ssl.truststore.certificates"),
    ) {
        (Some(path), _) => {
            let key = "ssl.truststore.location";
            let text = std::fs::read_to_string(path)
                .map_err(|e| StoreError::new(key, format!("cannot read {path}: {e}")))?;
            (key, security::pem::certificates(&text))
        }
        (None, Some(text)) => (
            "ssl.truststore.certificates",
            security::pem::certificates(text),
        ),
        (None, None) => {
            return Err(StoreError::new("ssl.truststore.location", "ssl.client.auth needs the CAs of client certificates in ssl.truststore.location or ssl.truststore.certificates"))
        }
    };
    let certs = certs.map_err(|e| StoreError::new(key, e))?;
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(CertificateDer::from(cert))
            .map_err(|e| StoreError::new(key, format!("not a CA certificate: {e}")))?;
    }
    Ok(roots)
}

#[derive(Debug)]
enum KeySource {
    File(PathBuf),
    Inline { chain: String, key: String },
}

/// The listener's certificate and key, replaced when its file changes.
#[derive(Debug)]
struct Keystore {
    source: KeySource,
    /// `ssl.key.password`, for an `ENCRYPTED PRIVATE KEY`.
    password: Option<String>,
    current: RwLock<(Arc<CertifiedKey>, Option<SystemTime>)>,
}

impl Keystore {
    fn load(source: KeySource, password: Option<String>) -> Result<Keystore, StoreError> {
        let (key, modified) = certified_key(&source, password.as_deref())?;
        Ok(Keystore {
            source,
            password,
            current: RwLock::new((key, modified)),
        })
    }

    fn reload_if_changed(&self, listener: &str) {
        let KeySource::File(path) = &self.source else {
            return;
        };
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        let before = self.current.read().unwrap_or_else(|p| p.into_inner()).1;
        if modified.is_none() || modified == before {
            return;
        }
        match certified_key(&self.source, self.password.as_deref()) {
            Ok(loaded) => {
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = loaded;
                info!(listener, path = %path.display(), "reloaded the listener's certificate");
            }
            // A half-written file: keep serving the old certificate and try again later.
            Err(StoreError { reason, .. }) => {
                warn!(listener, path = %path.display(), %reason, "cannot reload the listener's certificate; keeping the old one")
            }
        }
    }
}

impl ResolvesServerCert for Keystore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.current.read().unwrap_or_else(|p| p.into_inner()).0,
        ))
    }
}

fn certified_key(
    source: &KeySource,
    password: Option<&str>,
) -> Result<(Arc<CertifiedKey>, Option<SystemTime>), StoreError> {
    let (chain, key, modified) = match source {
        KeySource::File(path) => {
            let key = "ssl.keystore.location";
            let text = std::fs::read_to_string(path).map_err(|e| {
                StoreError::new(key, format!("cannot read {}: {e}", path.display()))
            })?;
            let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
            (
                security::pem::certificates(&text).map_err(|e| StoreError::new(key, e))?,
                security::pem::private_key(&text, password).map_err(|e| StoreError::new(key, e))?,
                modified,
            )
        }
        KeySource::Inline { chain, key } => (
            security::pem::certificates(chain)
                .map_err(|e| StoreError::new("ssl.keystore.certificate.chain", e))?,
            security::pem::private_key(key, password)
                .map_err(|e| StoreError::new("ssl.keystore.key", e))?,
            None,
        ),
    };
    let key_name = match source {
        KeySource::File(_) => "ssl.keystore.location",
        KeySource::Inline { .. } => "ssl.keystore.key",
    };
    let key = match key {
        security::pem::PrivateKey::Pkcs8(der) => {
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der))
        }
        security::pem::PrivateKey::Pkcs1(der) => {
            PrivateKeyDer::Pkcs1(PrivatePkcs1KeyDer::from(der))
        }
        security::pem::PrivateKey::Sec1(der) => PrivateKeyDer::Sec1(PrivateSec1KeyDer::from(der)),
    };
    let chain: Vec<CertificateDer<'static>> = chain.into_iter().map(CertificateDer::from).collect();
    let provider = rustls::crypto::ring::default_provider();
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| StoreError::new(key_name, format!("not a usable private key: {e}")))?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|e| {
        StoreError::new(
            key_name,
            format!("the private key does not belong to the first certificate of the chain: {e}"),
        )
    })?;
    Ok((Arc::new(certified), modified))
}

/// The RFC 2253 subject of a DER certificate, as Java's `X500Principal.getName()` writes it
/// (most specific RDN first, `CN=alice,OU=eng,O=acme`).
pub(crate) fn subject_dn(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_cert::der::Decode as _;
    let cert = x509_cert::Certificate::from_der(cert.as_ref()).ok()?;
    Some(cert.tbs_certificate.subject.to_string())
}
