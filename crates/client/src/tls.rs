//! TLS for the client's connections (`security.protocol=SSL` or `SASL_SSL` in a
//! `--command-config` file), with rustls: the broker's certificate must chain to a CA of the
//! configured PEM file, and name the host the client connected to unless
//! `ssl.endpoint.identification.algorithm` is empty (Kafka's switch for that check).
//! Client certificates (mTLS) are not offered.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::error::ClientError;

/// What a TLS connection trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// A PEM file of CA certificates (`ssl.ca.location`, or `ssl.truststore.location` with
    /// `ssl.truststore.type=PEM`).
    pub ca_file: PathBuf,
    /// Whether the certificate must name the host (`ssl.endpoint.identification.algorithm`,
    /// `https` by default as in Kafka 2.0+; empty turns it off).
    pub verify_hostname: bool,
}

fn config_error(message: String) -> ClientError {
    ClientError::Config(message)
}

fn roots(ca_file: &Path) -> Result<RootCertStore, ClientError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(ca_file)
        .map_err(|e| {
            config_error(format!(
                "cannot read the CA file {}: {e}",
                ca_file.display()
            ))
        })?
        .collect::<Result<_, _>>()
        .map_err(|e| config_error(format!("the CA file {} is not PEM: {e}", ca_file.display())))?;
    if certs.is_empty() {
        return Err(config_error(format!(
            "the CA file {} holds no certificate",
            ca_file.display()
        )));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| {
            config_error(format!(
                "a certificate of {} is unusable: {e}",
                ca_file.display()
            ))
        })?;
    }
    Ok(roots)
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
    let roots = Arc::new(roots(&settings.ca_file)?);
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| config_error(format!("TLS: {e}")))?;
    let config = if settings.verify_hostname {
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| config_error(format!("TLS: {e}")))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyName(verifier)))
            .with_no_client_auth()
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
        .map_err(|source| ClientError::Io {
            addr: addr.to_string(),
            source: std::io::Error::new(source.kind(), format!("TLS handshake failed: {source}")),
        })
}
