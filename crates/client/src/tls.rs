//! TLS for the client's connections (`security.protocol=SSL` or `SASL_SSL` in a
//! `--command-config` file), with rustls: the broker's certificate must chain to a CA of the
//! configured PEM file, and name the host the client connected to unless
//! `ssl.endpoint.identification.algorithm` is empty (Kafka's switch for that check).
//! A client certificate (mTLS) is offered when the settings carry one: the broker's own
//! connections to other brokers present its keystore, as Kafka's client-mode `SslFactory`.
//! Files are read at each connection, so a rotated certificate is used from the next one.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::error::ClientError;

/// PEM data: a file, or the text itself (Kafka's `ssl.truststore.certificates`,
/// `ssl.keystore.certificate.chain` + `ssl.keystore.key`).
#[derive(Clone, PartialEq, Eq)]
pub enum PemSource {
    /// A PEM file, read at each connection.
    File(PathBuf),
    /// PEM text.
    Text(String),
}

impl std::fmt::Debug for PemSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PemSource::File(path) => f.debug_tuple("File").field(path).finish(),
            // Inline keystores hold a private key: never print it.
            PemSource::Text(_) => f.write_str("Text(..)"),
        }
    }
}

impl PemSource {
    fn describe(&self) -> String {
        match self {
            PemSource::File(path) => path.display().to_string(),
            PemSource::Text(_) => "(inline PEM)".to_owned(),
        }
    }

    fn read(&self) -> Result<Vec<u8>, ClientError> {
        match self {
            PemSource::File(path) => std::fs::read(path)
                .map_err(|e| config_error(format!("cannot read {}: {e}", path.display()))),
            PemSource::Text(text) => Ok(text.as_bytes().to_vec()),
        }
    }
}

/// What a TLS connection trusts, and the certificate it presents if asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// CA certificates (`ssl.ca.location`, or `ssl.truststore.location` /
    /// `ssl.truststore.certificates` with `ssl.truststore.type=PEM`).
    pub trust: PemSource,
    /// Whether the certificate must name the host (`ssl.endpoint.identification.algorithm`,
    /// `https` by default as in Kafka 2.0+; empty turns it off).
    pub verify_hostname: bool,
    /// The client certificate chain and its unencrypted private key, in one PEM
    /// (`ssl.keystore.*`), presented when the server asks for one; `None` presents none.
    pub identity: Option<PemSource>,
}

impl TlsSettings {
    /// Settings trusting the CAs of the PEM file `ca_file`, checking host names, with no
    /// client certificate.
    pub fn with_ca_file(ca_file: impl Into<PathBuf>) -> TlsSettings {
        TlsSettings {
            trust: PemSource::File(ca_file.into()),
            verify_hostname: true,
            identity: None,
        }
    }

    /// Reads the files and builds the TLS configuration once, so a broker or tool can refuse
    /// a bad setting at start instead of at its first connection.
    pub fn check(&self) -> Result<(), ClientError> {
        client_config(self).map(|_| ())
    }
}

fn config_error(message: String) -> ClientError {
    ClientError::Config(message)
}

fn roots(trust: &PemSource) -> Result<RootCertStore, ClientError> {
    let what = trust.describe();
    let pem = trust.read()?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| config_error(format!("the CA file {what} is not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(config_error(format!(
            "the CA file {what} holds no certificate"
        )));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| config_error(format!("a certificate of {what} is unusable: {e}")))?;
    }
    Ok(roots)
}

/// The certificate chain (leaf first) and private key of a keystore PEM.
fn identity(
    source: &PemSource,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), ClientError> {
    let what = source.describe();
    let pem = source.read()?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| config_error(format!("the keystore {what} is not PEM: {e}")))?;
    if chain.is_empty() {
        return Err(config_error(format!(
            "the keystore {what} holds no certificate"
        )));
    }
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        config_error(format!(
            "the keystore {what} holds no usable private key ({e}); encrypted keys are not supported"
        ))
    })?;
    Ok((chain, key))
}

/// The chain checks of WebPKI, without the host name check.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                ..
            })) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// A rustls client configuration for `settings`.
pub(crate) fn client_config(settings: &TlsSettings) -> Result<ClientConfig, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = Arc::new(roots(&settings.trust)?);
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| config_error(format!("TLS: {e}")))?;
    let builder = if settings.verify_hostname {
        builder.with_root_certificates(roots)
    } else {
        let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| config_error(format!("TLS: {e}")))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyName(verifier)))
    };
    let config = match &settings.identity {
        None => builder.with_no_client_auth(),
        Some(source) => {
            let (chain, key) = identity(source)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                config_error(format!(
                    "the keystore {} is unusable: {e}",
                    source.describe()
                ))
            })?
        }
    };
    Ok(config)
}

/// Runs the TLS handshake over `stream` to `addr` (`host:port`).
pub(crate) async fn connect(
    stream: TcpStream,
    addr: &str,
    settings: &TlsSettings,
) -> Result<TlsStream<TcpStream>, ClientError> {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| config_error(format!("TLS: {host} is not a server name: {e}")))?;
    TlsConnector::from(Arc::new(client_config(settings)?))
        .connect(name, stream)
        .await
        .map_err(|source| {
            // A refused certificate (either side's) is an authentication failure; a peer
            // that vanished mid-handshake is a transport one.
            if source.get_ref().is_some_and(|e| e.is::<rustls::Error>()) {
                ClientError::Authentication {
                    addr: addr.to_string(),
                    code: None,
                    message: format!("TLS handshake failed: {source}"),
                }
            } else {
                ClientError::Io {
                    addr: addr.to_string(),
                    source: std::io::Error::new(
                        source.kind(),
                        format!("TLS handshake failed: {source}"),
                    ),
                }
            }
        })
}
