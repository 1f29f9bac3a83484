//! PEM as Kafka reads it (`DefaultSslEngineFactory`'s `PemParser`, KIP-651): certificates and
//! private keys in `ssl.keystore.key`, `ssl.keystore.certificate.chain`,
//! `ssl.truststore.certificates` and PEM store files.
//!
//! Kafka matches a block with a pattern, not line by line, so a value a properties file
//! joined from continuation lines (`-----BEGIN PRIVATE KEY----- MIIEv... -----END PRIVATE
//! KEY-----`, spaces where the newlines were) reads like a file: whitespace may stand anywhere
//! between and inside the markers' words, the markers' dashes may be any number, text around
//! the blocks is ignored, and the base64 may lack its `=` padding. The same here.
//!
//! Keys: `PRIVATE KEY` (PKCS#8) as Kafka, `ENCRYPTED PRIVATE KEY` (PKCS#8 PBES2: PBKDF2 or
//! scrypt with AES-CBC, what `openssl pkcs8 -topk8` writes) with the password Kafka takes from
//! `ssl.key.password`; beyond Kafka, `RSA PRIVATE KEY` (PKCS#1) and `EC PRIVATE KEY` (SEC1),
//! which rustls reads too. OpenSSL's legacy encrypted PEM (a `Proc-Type: 4,ENCRYPTED` header)
//! is refused with the command that converts it.

use std::fmt;
use std::sync::OnceLock;

use base64::engine::general_purpose::GeneralPurpose;
use base64::engine::{DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;
use regex::Regex;

/// Why PEM text did not give what was asked for, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PemError(String);

impl fmt::Display for PemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PemError {}

fn error(reason: impl Into<String>) -> PemError {
    PemError(reason.into())
}

/// One `-----BEGIN <label>----- ... -----END <label>-----` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PemBlock {
    /// The label, its words joined by single spaces (`PRIVATE KEY`).
    pub label: String,
    /// The decoded base64.
    pub der: Vec<u8>,
    /// The block had RFC 1421 headers (`Proc-Type: 4,ENCRYPTED`, `DEK-Info: ...`).
    pub has_headers: bool,
}

/// A private key in one of the DER forms rustls loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrivateKey {
    /// PKCS#8 `PrivateKeyInfo` (decrypted if it was an `ENCRYPTED PRIVATE KEY`).
    Pkcs8(Vec<u8>),
    /// PKCS#1 `RSAPrivateKey`.
    Pkcs1(Vec<u8>),
    /// SEC1 `ECPrivateKey`.
    Sec1(Vec<u8>),
}

fn begin_marker() -> &'static Regex {
    static BEGIN: OnceLock<Regex> = OnceLock::new();
    BEGIN.get_or_init(|| {
        Regex::new(r"-+BEGIN\s+([A-Z0-9]+(?:\s+[A-Z0-9]+)*)\s*-+").expect("valid pattern")
    })
}

const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Every PEM block in `text`, in order. Text outside the blocks is ignored.
pub fn blocks(text: &str) -> Result<Vec<PemBlock>, PemError> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(begin) = begin_marker().captures_at(text, at) {
        let whole = begin.get(0).expect("match");
        let words: Vec<&str> = begin[1].split_whitespace().collect();
        let label = words.join(" ");
        let end_pattern = format!(r"-+END\s+{}\s*-+", words.join(r"\s+"));
        let end = Regex::new(&end_pattern).expect("valid pattern");
        let Some(end) = end.find_at(text, whole.end()) else {
            return Err(error(format!(
                "-----BEGIN {label}----- has no matching -----END {label}-----"
            )));
        };
        let body = &text[whole.end()..end.start()];
        // RFC 1421 headers are lines holding a colon before the base64 (Kafka skips them too).
        let has_headers = body.contains(':');
        let base64: String = body
            .lines()
            .filter(|line| !line.contains(':'))
            .flat_map(str::chars)
            .filter(|c| !c.is_whitespace())
            .collect();
        let der = BASE64.decode(base64.as_bytes()).map_err(|e| {
            error(format!(
                "the {label} between its BEGIN and END markers is not base64 ({e})"
            ))
        })?;
        found.push(PemBlock {
            label,
            der,
            has_headers,
        });
        at = end.end();
    }
    Ok(found)
}

/// The certificates in `text` (blocks labelled `CERTIFICATE`, or any label ending in it, as
/// Kafka's pattern matches), in order; at least one.
pub fn certificates(text: &str) -> Result<Vec<Vec<u8>>, PemError> {
    let certs: Vec<Vec<u8>> = blocks(text)?
        .into_iter()
        .filter(|b| b.label.ends_with("CERTIFICATE"))
        .map(|b| b.der)
        .collect();
    if certs.is_empty() {
        return Err(error(
            "no certificate found (expected -----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)",
        ));
    }
    Ok(certs)
}

/// The one private key in `text`, decrypted with `password` if it is an `ENCRYPTED PRIVATE
/// KEY`. A password given for a key that is not encrypted is not needed and is ignored.
pub fn private_key(text: &str, password: Option<&str>) -> Result<PrivateKey, PemError> {
    let keys: Vec<PemBlock> = blocks(text)?
        .into_iter()
        .filter(|b| b.label.ends_with("PRIVATE KEY"))
        .collect();
    let key = match <[PemBlock; 1]>::try_from(keys) {
        Ok([key]) => key,
        Err(keys) if keys.is_empty() => {
            return Err(error(
                "not a PEM private key: no -----BEGIN PRIVATE KEY----- ... -----END PRIVATE KEY----- found",
            ))
        }
        Err(keys) => {
            return Err(error(format!(
                "expected one private key, found {}",
                keys.len()
            )))
        }
    };
    if key.has_headers {
        return Err(error(format!(
            "the {} uses OpenSSL's legacy PEM encryption (a Proc-Type header), which Kafka does not read either; convert it to PKCS#8 with `openssl pkcs8 -topk8 -v2 aes-256-cbc -in OLD -out NEW` (encrypted) or `-nocrypt` (plain)",
            key.label
        )));
    }
    match key.label.as_str() {
        "PRIVATE KEY" => Ok(PrivateKey::Pkcs8(key.der)),
        "RSA PRIVATE KEY" => Ok(PrivateKey::Pkcs1(key.der)),
        "EC PRIVATE KEY" => Ok(PrivateKey::Sec1(key.der)),
        "ENCRYPTED PRIVATE KEY" => {
            let Some(password) = password.filter(|p| !p.is_empty()) else {
                return Err(error(
                    "the key is an ENCRYPTED PRIVATE KEY: give its password in ssl.key.password",
                ));
            };
            decrypt(&key.der, password).map(PrivateKey::Pkcs8)
        }
        other => Err(error(format!(
            "unsupported key type {other} (expected PRIVATE KEY, ENCRYPTED PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)"
        ))),
    }
}

fn decrypt(der: &[u8], password: &str) -> Result<Vec<u8>, PemError> {
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der).map_err(|e| {
        error(format!(
            "the ENCRYPTED PRIVATE KEY is not a PKCS#8 EncryptedPrivateKeyInfo ({e})"
        ))
    })?;
    let plain = info.decrypt(password).map_err(|e| {
        error(format!(
            "cannot decrypt the ENCRYPTED PRIVATE KEY with ssl.key.password: a wrong password, or an encryption other than PBES2 with PBKDF2 or scrypt and AES-CBC ({e})"
        ))
    })?;
    Ok(plain.as_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    const B64: &str = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="; // "ABC...XYZ"

    #[test]
    fn whitespace_anywhere_between_and_in_the_markers() {
        let forms = [
            format!("-----BEGIN CERTIFICATE-----\n{B64}\n-----END CERTIFICATE-----\n"),
            // A properties file's continuation lines: spaces where the newlines were.
            format!("-----BEGIN CERTIFICATE----- {} {} -----END CERTIFICATE-----", &B64[..20], &B64[20..]),
            // No newline at the end, CRLF, tabs, padding dropped, any number of dashes.
            format!("--BEGIN  CERTIFICATE--\r\n\t{}\r\n---END\nCERTIFICATE---", B64.trim_end_matches('=')),
            format!("subject=CN=x\nissuer=CN=x\n-----BEGIN CERTIFICATE-----\n{B64}\n-----END CERTIFICATE-----"),
        ];
        for text in &forms {
            assert_eq!(
                certificates(text).unwrap(),
                vec![b"ABCDEFGHIJKLMNOPQRSTUVWXYZ".to_vec()],
                "{text:?}"
            );
        }
    }

    #[test]
    fn chains_keep_their_order_and_keys_their_kind() {
        let text = format!(
            "-----BEGIN CERTIFICATE----- QQ== -----END CERTIFICATE----- -----BEGIN PRIVATE KEY----- {B64} -----END PRIVATE KEY----- -----BEGIN CERTIFICATE----- Qg== -----END CERTIFICATE-----"
        );
        assert_eq!(
            certificates(&text).unwrap(),
            vec![b"A".to_vec(), b"B".to_vec()]
        );
        assert_eq!(
            private_key(&text, None).unwrap(),
            PrivateKey::Pkcs8(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ".to_vec())
        );
        let rsa = "-----BEGIN RSA PRIVATE KEY-----\nQQ==\n-----END RSA PRIVATE KEY-----";
        assert_eq!(
            private_key(rsa, None).unwrap(),
            PrivateKey::Pkcs1(b"A".to_vec())
        );
        let ec = "-----BEGIN EC PRIVATE KEY----- QQ== -----END EC PRIVATE KEY-----";
        assert_eq!(
            private_key(ec, Some("unused")).unwrap(),
            PrivateKey::Sec1(b"A".to_vec())
        );
    }

    #[test]
    fn errors_are_words() {
        let cases: &[(&str, &str)] = &[
            ("-----BEGIN PRIVATE KEY----- QUJD", "has no matching -----END PRIVATE KEY-----"),
            ("-----BEGIN PRIVATE KEY----- QU*D -----END PRIVATE KEY-----", "not base64"),
            ("just text", "not a PEM private key"),
            (
                "-----BEGIN CERTIFICATE----- QQ== -----END CERTIFICATE-----",
                "not a PEM private key",
            ),
            (
                "-----BEGIN PRIVATE KEY----- QQ== -----END PRIVATE KEY-----\n-----BEGIN PRIVATE KEY----- QQ== -----END PRIVATE KEY-----",
                "expected one private key, found 2",
            ),
            (
                "-----BEGIN ENCRYPTED PRIVATE KEY----- QQ== -----END ENCRYPTED PRIVATE KEY-----",
                "give its password in ssl.key.password",
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nQQ==\n-----END RSA PRIVATE KEY-----",
                "openssl pkcs8 -topk8",
            ),
            (
                "-----BEGIN DSA PRIVATE KEY----- QQ== -----END DSA PRIVATE KEY-----",
                "unsupported key type DSA PRIVATE KEY",
            ),
        ];
        for (text, want) in cases {
            let err = private_key(text, None).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
            assert!(!err.contains("[8"), "no byte dumps: {err}");
        }
        let err = private_key(
            "-----BEGIN ENCRYPTED PRIVATE KEY----- QQ== -----END ENCRYPTED PRIVATE KEY-----",
            Some("pw"),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("not a PKCS#8 EncryptedPrivateKeyInfo"),
            "{err}"
        );
        let err =
            certificates("-----BEGIN PRIVATE KEY----- QQ== -----END PRIVATE KEY-----").unwrap_err();
        assert!(err.to_string().contains("no certificate found"), "{err}");
    }
    /// A P-256 key, and the same key as `openssl pkcs8 -topk8 -v2 aes-256-cbc` (PBKDF2) and
    /// `-scrypt` wrote it with the password `k3y-secret`.
    const PLAIN: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg6jG4P+yw4M5zm6E2\nNGfsWoMjD9QYuMrqkuDoKWuwmqihRANCAARu6kFNVmplojTROzQ5Q7hddFMgUoGG\nY5YZd5R2hBkyGsGNJl1GXf66BC+RFAnotIqdeTJMaS3qt3ieRFdU5fYe\n-----END PRIVATE KEY-----\n";
    const ENCRYPTED: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAhOdTwelfr7gwICCAAw\nDAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEPf+oHYsPi40sifLPY62rBYEgZDH\nkIR9WJ6NqL4pttyA0ZnMHdTj7EkacHP9dZee6zhayHR6/RgVpDM9vrg/0PNatW1F\n1tQAspnYncZ6r/nmI2/0/7fju/rliazBDEk5MPqgcCa0LR+grz1JInWLqrHJjGvQ\n5qjSvaz+EvaEvaxDd23qPF/uxlCve8rcUkcEaWWZJO4+PsQfzRwy8mn2V+NFHQc=\n-----END ENCRYPTED PRIVATE KEY-----\n";
    const ENCRYPTED_SCRYPT: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIHkME8GCSqGSIb3DQEFDTBCMCEGCSsGAQQB2kcECzAUBAidNtw+wD8BlgICQAAC\nAQgCAQEwHQYJYIZIAWUDBAEqBBBnKTF6dPhHVqmCOFk7SlYnBIGQMe9L94q/U0vD\n/Zj6f6IUUJfxyXeSn1S9zIIGe7+R3tDnpdyNckERnrfBrNT2DanQxctvrlUo/YDS\n/fKfm3Rjbm5nvgdwS5VqPcR2mFkNHAv3Hi6NpstC2H+vj70zbW+kz7Ifwo9Z5W3b\ngOwmhzjHLOtz2p3Xa7A6U0oUkicZRcxd94W5eapXhKVRZeBTzyfp\n-----END ENCRYPTED PRIVATE KEY-----\n";

    #[test]
    fn encrypted_keys_open_with_their_password() {
        let want = private_key(PLAIN, None).unwrap();
        for text in [ENCRYPTED, ENCRYPTED_SCRYPT] {
            assert_eq!(private_key(text, Some("k3y-secret")).unwrap(), want);
            // Joined by a properties file's continuation lines.
            let joined = text.replace('\n', " ");
            assert_eq!(private_key(&joined, Some("k3y-secret")).unwrap(), want);
            let err = private_key(text, Some("wrong")).unwrap_err().to_string();
            assert!(
                err.contains("cannot decrypt the ENCRYPTED PRIVATE KEY"),
                "{err}"
            );
        }
    }
}
