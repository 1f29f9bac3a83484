//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them: no channel
//! binding (`n,,`), credentials stored as salt, stored key, server key and iterations
//! (Kafka's `ScramCredential`), written in `/config/users/<user>` as
//! `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`.
//!
//! [`ScramServer`] and [`ScramClient`] are state machines over the exchanged messages; the
//! caller supplies the nonce and salt bytes, so the same inputs always give the same outputs.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// The two SCRAM mechanisms Kafka supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    /// `SCRAM-SHA-256`.
    Sha256,
    /// `SCRAM-SHA-512`.
    Sha512,
}

impl ScramMechanism {
    /// Both, in Kafka's order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism called `name` (case-sensitive, as SASL names are).
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The id Kafka's DescribeUserScramCredentials/AlterUserScramCredentials use (1, 2).
    pub fn id(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism with wire id `id`.
    pub fn from_id(id: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.id() == id)
    }

    /// Kafka's bounds on iterations (`ScramMechanism.minIterations`, and the 16384 cap of
    /// AlterUserScramCredentials).
    pub const MIN_ITERATIONS: u32 = 4096;
    /// See [`ScramMechanism::MIN_ITERATIONS`].
    pub const MAX_ITERATIONS: u32 = 16384;

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    /// `Hi(password, salt, i)`: PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut out = vec![0; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            ScramMechanism::Sha512 => {
                let mut out = vec![0; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }

    /// The stored credential for a salted password (what KIP-554 clients send).
    pub fn credential_from_salted(
        self,
        salt: &[u8],
        salted_password: &[u8],
        iterations: u32,
    ) -> ScramCredential {
        let client_key = self.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: self.hash(&client_key),
            server_key: self.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// The stored credential for a password.
    pub fn credential(self, password: &str, salt: &[u8], iterations: u32) -> ScramCredential {
        let salted = self.salted_password(password.as_bytes(), salt, iterations);
        self.credential_from_salted(salt, &salted, iterations)
    }
}

/// What the broker keeps for one user and mechanism (Kafka's `ScramCredential`).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// The salt.
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Why a SCRAM exchange failed. The text is for the broker's log; what the client is told is
/// [`ScramError::client_message`] (Kafka keeps the detail from unauthenticated clients).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// A message did not follow RFC 5802.
    #[error("Invalid SCRAM message: {0}")]
    Malformed(String),
    /// The user has no credential for this mechanism.
    #[error("Authentication failed: Invalid user credentials")]
    UnknownUser,
    /// The stored credential has fewer iterations than the mechanism's minimum.
    #[error("Iterations {0} is less than the minimum 4096")]
    TooFewIterations(u32),
    /// The client proof did not verify (wrong password).
    #[error("Authentication failed: Invalid client final message")]
    InvalidProof,
    /// An authorization id other than the user (told to the client as is, as Kafka does).
    #[error("Authentication failed: Client requested an authorization id that is different from username")]
    AuthorizationId,
    /// The server's signature did not verify (client side).
    #[error("Invalid server signature in server final message")]
    BadServerSignature,
    /// The server answered `e=...`.
    #[error("SCRAM authentication failed: {0}")]
    Server(String),
    /// A message arrived after the exchange ended.
    #[error("Unexpected SCRAM message after the exchange completed")]
    Done,
}

impl ScramError {
    /// What the broker answers the client in SaslAuthenticate's `error_message`: Kafka's
    /// generic text for every failure but a mismatched authorization id, so that a client
    /// cannot tell an unknown user from a wrong password.
    pub fn client_message(&self, mechanism: ScramMechanism) -> String {
        match self {
            ScramError::AuthorizationId => self.to_string(),
            _ => format!(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                mechanism.name()
            ),
        }
    }
}

impl ScramCredential {
    /// Kafka's `ScramCredentialUtils.credentialToString`.
    pub fn to_config_string(&self) -> String {
        format!(
            "salt={},stored_key={},server_key={},iterations={}",
            STANDARD.encode(&self.salt),
            STANDARD.encode(&self.stored_key),
            STANDARD.encode(&self.server_key),
            self.iterations
        )
    }

    /// Parses [`ScramCredential::to_config_string`]'s format.
    pub fn from_config_string(text: &str) -> Result<ScramCredential, ScramError> {
        let bad = |why: &str| ScramError::Malformed(format!("credential: {why}"));
        let mut salt = None;
        let mut stored_key = None;
        let mut server_key = None;
        let mut iterations = None;
        for field in text.split(',') {
            let (key, value) = field
                .split_once('=')
                .ok_or_else(|| bad("expected key=value"))?;
            let b64 = || STANDARD.decode(value).map_err(|_| bad("not base64"));
            match key.trim() {
                "salt" => salt = Some(b64()?),
                "stored_key" => stored_key = Some(b64()?),
                "server_key" => server_key = Some(b64()?),
                "iterations" => iterations = Some(value.parse().map_err(|_| bad("iterations"))?),
                _ => {}
            }
        }
        Ok(ScramCredential {
            salt: salt.ok_or_else(|| bad("no salt"))?,
            stored_key: stored_key.ok_or_else(|| bad("no stored_key"))?,
            server_key: server_key.ok_or_else(|| bad("no server_key"))?,
            iterations: iterations.ok_or_else(|| bad("no iterations"))?,
        })
    }
}

/// The broker's side of one exchange.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: ServerState,
}

#[derive(Debug)]
enum ServerState {
    First,
    Final {
        username: String,
        client_first_bare: String,
        server_first: String,
        nonce: String,
        credential: ScramCredential,
    },
    Done,
}

/// What the server says after a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStep {
    /// Send this and wait for the client's next message.
    Continue(Vec<u8>),
    /// Send this; `username` is authenticated.
    Done {
        /// The server-final message.
        message: Vec<u8>,
        /// The authenticated user.
        username: String,
    },
}

impl ScramServer {
    /// A new exchange.
    pub fn new(mechanism: ScramMechanism) -> Self {
        ScramServer {
            mechanism,
            state: ServerState::First,
        }
    }

    /// The mechanism of this exchange.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Takes the client's next message. `lookup` finds a user's credential (None: unknown
    /// user, which fails at once, as in Kafka; the client is told the same as for a wrong
    /// password); `server_nonce` is fresh random printable text without commas.
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Result<ServerStep, ScramError> {
        let text =
            std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8".into()))?;
        match std::mem::replace(&mut self.state, ServerState::Done) {
            ServerState::First => self.first(text, lookup, server_nonce),
            ServerState::Final {
                username,
                client_first_bare,
                server_first,
                nonce,
                credential,
            } => {
                let client_final = ClientFinal::parse(text)?;
                if client_final.nonce != nonce {
                    return Err(ScramError::Malformed("nonce mismatch".into()));
                }
                if client_final.channel_binding != "biws" && client_final.channel_binding != "eSws"
                {
                    return Err(ScramError::Malformed(
                        "channel binding not supported".into(),
                    ));
                }
                let auth_message = format!(
                    "{client_first_bare},{server_first},{}",
                    client_final.without_proof
                );
                let invalid = ScramError::InvalidProof;
                let signature = self
                    .mechanism
                    .hmac(&credential.stored_key, auth_message.as_bytes());
                if client_final.proof.len() != signature.len() {
                    return Err(invalid);
                }
                let client_key: Vec<u8> = client_final
                    .proof
                    .iter()
                    .zip(&signature)
                    .map(|(a, b)| a ^ b)
                    .collect();
                if !constant_time_eq(&self.mechanism.hash(&client_key), &credential.stored_key) {
                    return Err(invalid);
                }
                let server_signature = self
                    .mechanism
                    .hmac(&credential.server_key, auth_message.as_bytes());
                Ok(ServerStep::Done {
                    message: format!("v={}", STANDARD.encode(server_signature)).into_bytes(),
                    username,
                })
            }
            ServerState::Done => Err(ScramError::Done),
        }
    }

    fn first(
        &mut self,
        text: &str,
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Result<ServerStep, ScramError> {
        let bad = |why: &str| ScramError::Malformed(why.to_owned());
        // gs2-header: "n," or "y," (no channel binding), then an optional authzid, then ",".
        let rest = text
            .strip_prefix("n,")
            .or_else(|| text.strip_prefix("y,"))
            .ok_or_else(|| bad("channel binding is not supported (expected n,,)"))?;
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or_else(|| bad("missing client-first-message-bare"))?;
        let mut username = None;
        let mut client_nonce = None;
        for field in bare.split(',') {
            if let Some(v) = field.strip_prefix("n=") {
                username = Some(unescape_name(v)?);
            } else if let Some(v) = field.strip_prefix("r=") {
                client_nonce = Some(v.to_owned());
            } else if field.starts_with("m=") {
                return Err(bad("mandatory extensions are not supported"));
            }
            // Other fields are Kafka's extensions (tokenauth=...): ignored.
        }
        let username = username.ok_or_else(|| bad("missing user name"))?;
        let client_nonce = client_nonce.ok_or_else(|| bad("missing nonce"))?;
        // Kafka's order: the credential, then the authorization id, then the iterations.
        let credential = lookup(&username).ok_or(ScramError::UnknownUser)?;
        if let Some(authzid) = authzid.strip_prefix("a=") {
            if unescape_name(authzid)? != username {
                return Err(ScramError::AuthorizationId);
            }
        } else if !authzid.is_empty() {
            return Err(bad("invalid gs2 header"));
        }
        if credential.iterations < ScramMechanism::MIN_ITERATIONS {
            return Err(ScramError::TooFewIterations(credential.iterations));
        }
        let (salt, iterations) = (credential.salt.clone(), credential.iterations);
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!("r={nonce},s={},i={iterations}", STANDARD.encode(salt));
        self.state = ServerState::Final {
            username,
            client_first_bare: bare.to_owned(),
            server_first: server_first.clone(),
            nonce,
            credential,
        };
        Ok(ServerStep::Continue(server_first.into_bytes()))
    }
}

/// The user a client-first message names (`n,,n=<user>,r=...`), so the caller can fetch the
/// credential before [`ScramServer::step`]; `None` for any other message.
pub fn client_first_username(message: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(message).ok()?;
    let rest = text
        .strip_prefix("n,")
        .or_else(|| text.strip_prefix("y,"))?;
    let (_, bare) = rest.split_once(',')?;
    let name = bare.split(',').find_map(|f| f.strip_prefix("n="))?;
    unescape_name(name).ok()
}

struct ClientFinal<'a> {
    channel_binding: &'a str,
    nonce: &'a str,
    proof: Vec<u8>,
    without_proof: &'a str,
}

impl<'a> ClientFinal<'a> {
    fn parse(text: &'a str) -> Result<Self, ScramError> {
        let bad = |why: &str| ScramError::Malformed(why.to_owned());
        let at = text.rfind(",p=").ok_or_else(|| bad("missing proof"))?;
        let without_proof = &text[..at];
        let proof = STANDARD
            .decode(&text[at + 3..])
            .map_err(|_| bad("proof is not base64"))?;
        let mut channel_binding = None;
        let mut nonce = None;
        for field in without_proof.split(',') {
            if let Some(v) = field.strip_prefix("c=") {
                channel_binding = Some(v);
            } else if let Some(v) = field.strip_prefix("r=") {
                nonce = Some(v);
            }
        }
        Ok(ClientFinal {
            channel_binding: channel_binding.ok_or_else(|| bad("missing channel binding"))?,
            nonce: nonce.ok_or_else(|| bad("missing nonce"))?,
            proof,
            without_proof,
        })
    }
}

/// The client's side of one exchange.
#[derive(Debug)]
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    client_nonce: String,
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// Starts an exchange for `username`; returns the client and its first message.
    pub fn start(
        mechanism: ScramMechanism,
        username: &str,
        password: &str,
        client_nonce: &str,
    ) -> (ScramClient, Vec<u8>) {
        let bare = format!("n={},r={client_nonce}", escape_name(username));
        let first = format!("n,,{bare}").into_bytes();
        let client = ScramClient {
            mechanism,
            password: password.to_owned(),
            client_first_bare: bare,
            client_nonce: client_nonce.to_owned(),
            expected_server_signature: None,
        };
        (client, first)
    }

    /// Takes the server-first message; returns the client-final message.
    pub fn server_first(&mut self, message: &[u8]) -> Result<Vec<u8>, ScramError> {
        let bad = |why: &str| ScramError::Malformed(why.to_owned());
        let text = std::str::from_utf8(message).map_err(|_| bad("not UTF-8"))?;
        if let Some(err) = text.strip_prefix("e=") {
            return Err(ScramError::Server(err.to_owned()));
        }
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for field in text.split(',') {
            if let Some(v) = field.strip_prefix("r=") {
                nonce = Some(v);
            } else if let Some(v) = field.strip_prefix("s=") {
                salt = Some(STANDARD.decode(v).map_err(|_| bad("salt is not base64"))?);
            } else if let Some(v) = field.strip_prefix("i=") {
                iterations = Some(v.parse::<u32>().map_err(|_| bad("iterations"))?);
            }
        }
        let nonce = nonce.ok_or_else(|| bad("missing nonce"))?;
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err(bad("the server nonce does not extend the client nonce"));
        }
        let salt = salt.ok_or_else(|| bad("missing salt"))?;
        let iterations = iterations.ok_or_else(|| bad("missing iterations"))?;
        if iterations < ScramMechanism::MIN_ITERATIONS {
            return Err(bad("too few iterations"));
        }
        let salted = self
            .mechanism
            .salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = self.mechanism.hmac(&salted, b"Client Key");
        let stored_key = self.mechanism.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = self.mechanism.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = self.mechanism.hmac(&salted, b"Server Key");
        self.expected_server_signature =
            Some(self.mechanism.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes())
    }

    /// Checks the server-final message.
    pub fn server_final(&self, message: &[u8]) -> Result<(), ScramError> {
        let text =
            std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8".into()))?;
        if let Some(err) = text.strip_prefix("e=") {
            return Err(ScramError::Server(err.to_owned()));
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| STANDARD.decode(v).ok())
            .ok_or(ScramError::BadServerSignature)?;
        match &self.expected_server_signature {
            Some(expected) if constant_time_eq(expected, &signature) => Ok(()),
            _ => Err(ScramError::BadServerSignature),
        }
    }
}

/// RFC 5802 `saslname`: `,` and `=` are written `=2C` and `=3D`.
fn escape_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

fn unescape_name(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("invalid user name escape".into())),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example, end to end through both state machines.
    #[test]
    fn rfc_7677_example() {
        let mechanism = ScramMechanism::Sha256;
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential = mechanism.credential("pencil", &salt, 4096);
        let (mut client, first) =
            ScramClient::start(mechanism, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let mut server = ScramServer::new(mechanism);
        let ServerStep::Continue(server_first) = server
            .step(
                &first,
                |_| Some(credential.clone()),
                "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            )
            .unwrap()
        else {
            panic!("expected a challenge")
        };
        assert_eq!(
            server_first,
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let client_final = client.server_first(&server_first).unwrap();
        assert_eq!(
            String::from_utf8(client_final.clone()).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        let ServerStep::Done { message, username } =
            server.step(&client_final, |_| None, "").unwrap()
        else {
            panic!("expected the end")
        };
        assert_eq!(username, "user");
        assert_eq!(message, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        client.server_final(&message).unwrap();
    }

    #[test]
    fn wrong_password_and_unknown_user_fail_alike_for_the_client() {
        for mechanism in ScramMechanism::ALL {
            let credential = mechanism.credential("right", b"salt-salt-salt!!", 4096);
            // A wrong password fails at the proof.
            let (mut client, first) = ScramClient::start(mechanism, "alice", "wrong", "abc");
            let mut server = ScramServer::new(mechanism);
            let ServerStep::Continue(challenge) = server
                .step(&first, |_| Some(credential.clone()), "xyz")
                .unwrap()
            else {
                panic!("expected a challenge")
            };
            let last = client.server_first(&challenge).unwrap();
            let wrong = server.step(&last, |_| None, "").unwrap_err();
            assert_eq!(wrong, ScramError::InvalidProof);
            // An unknown user fails at the first message, as in Kafka.
            let mut server = ScramServer::new(mechanism);
            let unknown = server.step(&first, |_| None, "xyz").unwrap_err();
            assert_eq!(unknown, ScramError::UnknownUser);
            // Either way the client reads Kafka's one message.
            let expected = format!(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                mechanism.name()
            );
            assert_eq!(wrong.client_message(mechanism), expected);
            assert_eq!(unknown.client_message(mechanism), expected);
            // The right password passes, and the client checks the server's signature.
            let (mut client, first) = ScramClient::start(mechanism, "alice", "right", "abc");
            let mut server = ScramServer::new(mechanism);
            let ServerStep::Continue(challenge) = server
                .step(&first, |_| Some(credential.clone()), "xyz")
                .unwrap()
            else {
                panic!("expected a challenge")
            };
            let last = client.server_first(&challenge).unwrap();
            let ServerStep::Done { message, username } = server.step(&last, |_| None, "").unwrap()
            else {
                panic!("expected the end")
            };
            assert_eq!(username, "alice");
            client.server_final(&message).unwrap();
            assert!(client.server_final(b"v=AAAA").is_err());
            // Nothing more is accepted after the end.
            assert_eq!(server.step(&last, |_| None, ""), Err(ScramError::Done));
        }
    }

    #[test]
    fn authorization_id_and_iterations_are_checked_like_kafka() {
        let mechanism = ScramMechanism::Sha256;
        let good = mechanism.credential("pw", b"0123456789abcdef", 4096);
        let mut server = ScramServer::new(mechanism);
        let err = server
            .step(b"n,a=bob,n=alice,r=abc", |_| Some(good.clone()), "x")
            .unwrap_err();
        assert_eq!(err, ScramError::AuthorizationId);
        assert_eq!(
            err.client_message(mechanism),
            "Authentication failed: Client requested an authorization id that is different from username"
        );
        let mut server = ScramServer::new(mechanism);
        assert!(matches!(
            server.step(b"n,a=alice,n=alice,r=abc", |_| Some(good.clone()), "x"),
            Ok(ServerStep::Continue(_))
        ));
        let weak = mechanism.credential("pw", b"0123456789abcdef", 1000);
        let mut server = ScramServer::new(mechanism);
        assert_eq!(
            server.step(b"n,,n=alice,r=abc", |_| Some(weak), "x"),
            Err(ScramError::TooFewIterations(1000))
        );
    }

    #[test]
    fn credential_string_round_trips_and_names_escape() {
        let c = ScramMechanism::Sha512.credential("p", b"0123456789abcdef", 8192);
        assert_eq!(
            ScramCredential::from_config_string(&c.to_config_string()),
            Ok(c)
        );
        assert_eq!(escape_name("a,b=c"), "a=2Cb=3Dc");
        assert_eq!(unescape_name("a=2Cb=3Dc").unwrap(), "a,b=c");
        assert!(unescape_name("a=2").is_err());
    }

    #[test]
    fn the_user_is_read_off_the_first_message_only() {
        let (_, first) = ScramClient::start(ScramMechanism::Sha256, "a,b", "pw", "nonce");
        assert_eq!(client_first_username(&first).as_deref(), Some("a,b"));
        assert_eq!(client_first_username(b"c=biws,r=abc,p=xyz"), None);
        assert_eq!(client_first_username(b"\xff"), None);
    }

    #[test]
    fn malformed_messages_are_refused() {
        for first in [
            "p=tls-unique,,n=u,r=x",
            "n,,r=x",
            "n,,n=u",
            "n,,n=u,r=x,m=ext",
            "n,a=v,n=u,r=x",
        ] {
            let mut server = ScramServer::new(ScramMechanism::Sha256);
            assert!(
                server.step(first.as_bytes(), |_| None, "s").is_err(),
                "{first}"
            );
        }
    }
}
