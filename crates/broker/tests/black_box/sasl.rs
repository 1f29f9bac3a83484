//! SASL on a SASL_PLAINTEXT listener (issue 13): PLAIN users from the listener's JAAS line,
//! SCRAM-SHA-256/512 credentials from `/config/users/<user>` in Kafka's format, Kafka's
//! answers and messages on failure, and nothing served before authentication.

use crate::common;

use std::collections::BTreeMap;

use broker::MetadataStore;
use client::{ClientError, Connection, ConnectionOptions, SaslCredentials};
use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use security::scram::{ScramClient, ScramMechanism};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SASL_AUTHENTICATION_FAILED: i16 = 58;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;

fn overrides(extra: &[&str]) -> Vec<String> {
    let mut all = vec![
        "listeners=PLAINTEXT://127.0.0.1:0,SASL://127.0.0.1:0".to_string(),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT".into(),
        "inter.broker.listener.name=PLAINTEXT".into(),
        "listener.name.sasl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512".into(),
        r#"listener.name.sasl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_admin="admin-secret";"#.into(),
    ];
    all.extend(extra.iter().map(|s| s.to_string()));
    all
}

/// Writes `user`'s SCRAM credentials into the store as Kafka's tools do.
async fn set_scram(store: &MetadataStore, user: &str, password: &str, iterations: u32) {
    let MetadataStore::Embedded(embedded) = store else {
        unreachable!("the tests use the embedded store")
    };
    let (client, events) = embedded.connect(metastore::SessionOptions::default());
    let zk = znodes::KafkaZkClient::new(client, events);
    let mut config = BTreeMap::new();
    for mechanism in ScramMechanism::ALL {
        let credential = mechanism.credential(password, b"0123456789abcdef", iterations);
        config.insert(mechanism.name().to_owned(), credential.to_config_string());
    }
    zk.set_entity_config_and_notify(&znodes::paths::user_entity_path(user), &config)
        .await
        .unwrap();
    zk.close().await;
}

async fn connect(
    addr: std::net::SocketAddr,
    mechanism: &str,
    user: &str,
    password: &str,
) -> Result<Connection, ClientError> {
    let options = ConnectionOptions {
        sasl: Some(SaslCredentials {
            mechanism: mechanism.into(),
            username: user.into(),
            password: password.into(),
        }),
        ..ConnectionOptions::default()
    };
    Connection::connect_with(&addr.to_string(), options).await
}

fn expect_failed(result: Result<Connection, ClientError>, message: &str) {
    match result {
        Err(ClientError::Authentication {
            code, message: got, ..
        }) => {
            assert_eq!(code, Some(SASL_AUTHENTICATION_FAILED), "{got}");
            assert_eq!(got, message);
        }
        Err(other) => panic!("expected SASL_AUTHENTICATION_FAILED, got {other}"),
        Ok(_) => panic!("authenticated with bad credentials"),
    }
}

#[tokio::test]
async fn plain_and_scram_authenticate_and_refuse_as_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let all = overrides(&[]);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let (broker, store) = start_broker_and_store(dir.path(), &all).await;
    set_scram(&store, "bob", "bob-secret", 4096).await;
    let sasl = broker.listener_addr("SASL").unwrap();

    let mut conn = connect(sasl, "PLAIN", "alice", "alice-secret")
        .await
        .unwrap();
    let metadata = conn.send(MetadataRequest::default()).await.unwrap();
    // Metadata on the SASL listener answers the SASL listener's endpoint.
    assert_eq!(metadata.brokers[0].port, i32::from(sasl.port()));
    expect_failed(
        connect(sasl, "PLAIN", "alice", "wrong").await,
        "Authentication failed: Invalid username or password",
    );
    expect_failed(
        connect(sasl, "PLAIN", "mallory", "alice-secret").await,
        "Authentication failed: Invalid username or password",
    );
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let mut conn = connect(sasl, mechanism, "bob", "bob-secret").await.unwrap();
        conn.send(MetadataRequest::default()).await.unwrap();
        let generic = format!("Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}");
        expect_failed(connect(sasl, mechanism, "bob", "wrong").await, &generic);
        // An unknown user reads the same message as a wrong password.
        expect_failed(connect(sasl, mechanism, "nobody", "x").await, &generic);
        // PLAIN users are not SCRAM users.
        expect_failed(
            connect(sasl, mechanism, "alice", "alice-secret").await,
            &generic,
        );
    }
    // A credential changed in the store holds for the next connection.
    set_scram(&store, "bob", "new-secret", 8192).await;
    connect(sasl, "SCRAM-SHA-256", "bob", "new-secret")
        .await
        .unwrap();
    assert!(connect(sasl, "SCRAM-SHA-256", "bob", "bob-secret")
        .await
        .is_err());

    // The PLAINTEXT listener needs no authentication and answers SASL requests with
    // ILLEGAL_SASL_STATE, as Kafka's KafkaApis does.
    let mut plain = Connection::connect(&broker.local_addr().to_string(), "t")
        .await
        .unwrap();
    let response = plain
        .send_version(
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            1,
        )
        .await
        .unwrap();
    assert_eq!(response.error_code, ILLEGAL_SASL_STATE);
    broker.shutdown().await;
}

async fn raw<R: kafka_protocol::protocol::Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: RequestKind,
) -> R {
    roundtrip(stream, key, version, correlation_id, &body).await
}

/// The connection is closed: a read gets end of file.
async fn assert_closed(stream: &mut TcpStream) {
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut byte))
        .await
        .expect("the broker closes the connection");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test]
async fn nothing_but_the_exchange_before_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let all = overrides(&["listener.name.sasl.connections.max.reauth.ms=60000"]);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let (broker, store) = start_broker_and_store(dir.path(), &all).await;
    set_scram(&store, "bob", "bob-secret", 4096).await;
    let sasl = broker.listener_addr("SASL").unwrap();

    // Metadata before authenticating: the connection closes without an answer.
    let mut stream = TcpStream::connect(sasl).await.unwrap();
    let frame = request_frame(
        ApiKey::Metadata,
        1,
        1,
        &RequestKind::Metadata(MetadataRequest::default()),
    );
    stream.write_all(&frame).await.unwrap();
    assert_closed(&mut stream).await;

    // An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list, then closed.
    let mut stream = TcpStream::connect(sasl).await.unwrap();
    let response: SaslHandshakeResponse = raw(
        &mut stream,
        ApiKey::SaslHandshake,
        1,
        1,
        RequestKind::SaslHandshake(
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("GSSAPI")),
        ),
    )
    .await;
    assert_eq!(response.error_code, UNSUPPORTED_SASL_MECHANISM);
    let offered: Vec<&str> = response.mechanisms.iter().map(|m| &**m).collect();
    assert_eq!(offered, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    assert_closed(&mut stream).await;

    // SCRAM by hand: ApiVersions, SaslHandshake v1, two SaslAuthenticate v2 rounds; the last
    // answer carries the session lifetime (KIP-152), then requests are served.
    let mut stream = TcpStream::connect(sasl).await.unwrap();
    let versions: ApiVersionsResponse = raw(
        &mut stream,
        ApiKey::ApiVersions,
        3,
        1,
        RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("sasl-test"))
                .with_client_software_version(StrBytes::from_static_str("1")),
        ),
    )
    .await;
    assert_eq!(versions.error_code, 0);
    let response: SaslHandshakeResponse = raw(
        &mut stream,
        ApiKey::SaslHandshake,
        1,
        2,
        RequestKind::SaslHandshake(
            SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str("SCRAM-SHA-512")),
        ),
    )
    .await;
    assert_eq!(response.error_code, 0);
    let (mut client, first) =
        ScramClient::start(ScramMechanism::Sha512, "bob", "bob-secret", "clientnonce");
    let authenticate = |token: Vec<u8>| {
        RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default().with_auth_bytes(token.into()),
        )
    };
    let challenge: SaslAuthenticateResponse = raw(
        &mut stream,
        ApiKey::SaslAuthenticate,
        2,
        3,
        authenticate(first),
    )
    .await;
    assert_eq!(challenge.error_code, 0);
    assert_eq!(challenge.session_lifetime_ms, 0);
    let last = client.server_first(&challenge.auth_bytes).unwrap();
    let done: SaslAuthenticateResponse = raw(
        &mut stream,
        ApiKey::SaslAuthenticate,
        2,
        4,
        authenticate(last),
    )
    .await;
    assert_eq!(done.error_code, 0);
    assert_eq!(done.session_lifetime_ms, 60_000);
    client.server_final(&done.auth_bytes).unwrap();
    let metadata: MetadataResponse = raw(
        &mut stream,
        ApiKey::Metadata,
        1,
        5,
        RequestKind::Metadata(MetadataRequest::default()),
    )
    .await;
    assert_eq!(metadata.brokers.len(), 1);
    // Re-authentication with another mechanism is refused (Kafka's message) and closes.
    let response: SaslHandshakeResponse = raw(
        &mut stream,
        ApiKey::SaslHandshake,
        1,
        6,
        RequestKind::SaslHandshake(
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        ),
    )
    .await;
    assert_eq!(response.error_code, 0);
    let refused: SaslAuthenticateResponse = raw(
        &mut stream,
        ApiKey::SaslAuthenticate,
        2,
        7,
        authenticate(security::plain::client_message("alice", "alice-secret")),
    )
    .await;
    assert_eq!(refused.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        refused.error_message.as_deref(),
        Some("SASL mechanism 'PLAIN' requested by client is not supported for re-authentication of mechanism 'SCRAM-SHA-512'")
    );
    assert_closed(&mut stream).await;

    // v0 handshake: the PLAIN token goes as a bare frame and the answer is an empty one.
    let mut stream = TcpStream::connect(sasl).await.unwrap();
    let response: SaslHandshakeResponse = raw(
        &mut stream,
        ApiKey::SaslHandshake,
        0,
        1,
        RequestKind::SaslHandshake(
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        ),
    )
    .await;
    assert_eq!(response.error_code, 0);
    let token = security::plain::client_message("alice", "alice-secret");
    let mut frame = (token.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&token);
    stream.write_all(&frame).await.unwrap();
    assert!(read_frame(&mut stream).await.is_empty());
    let metadata: MetadataResponse = raw(
        &mut stream,
        ApiKey::Metadata,
        1,
        2,
        RequestKind::Metadata(MetadataRequest::default()),
    )
    .await;
    assert_eq!(metadata.brokers.len(), 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_sasl_listener_without_its_settings_refuses_to_start() {
    for (extra, message) in [
        (
            vec!["listener.name.sasl.sasl.enabled.mechanisms=GSSAPI"],
            "mechanism GSSAPI is not supported",
        ),
        (
            vec![
                r#"listener.name.sasl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b""#,
            ],
            "must end with ';'",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let all = overrides(&extra);
        let config = config(
            dir.path(),
            &all.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let store = MetadataStore::from_config(&config).unwrap();
        let Err(err) = broker::Broker::start(config, store, None).await else {
            panic!("started with {extra:?}")
        };
        assert!(err.to_string().contains(message), "{err}");
    }
}

#[tokio::test]
async fn scram_credentials_are_managed_over_the_protocol() {
    use client::{AdminClient, AdminOptions};

    let dir = tempfile::tempdir().unwrap();
    let all = overrides(&[]);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let broker = start_broker(dir.path(), &all).await;
    eventually("controller", || broker.is_controller()).await;
    let sasl = broker.listener_addr("SASL").unwrap();
    let mut admin = AdminClient::connect(AdminOptions::new(&broker.local_addr().to_string()))
        .await
        .unwrap();
    // AlterUserScramCredentials: the client salts and hashes; the user can log in at once.
    admin
        .alter_user_scram_credentials(
            "carol",
            &[
                (ScramMechanism::Sha256, 8192, "c-secret".to_owned()),
                (ScramMechanism::Sha512, 4096, "c-secret".to_owned()),
            ],
            &[],
        )
        .await
        .unwrap();
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        connect(sasl, mechanism, "carol", "c-secret").await.unwrap();
    }
    let described = admin.describe_user_scram_credentials(&[]).await.unwrap();
    assert_eq!(described.len(), 1);
    assert_eq!(described[0].0, "carol");
    assert_eq!(
        described[0].1.as_ref().unwrap(),
        &vec![
            ("SCRAM-SHA-256".to_owned(), 8192),
            ("SCRAM-SHA-512".to_owned(), 4096)
        ]
    );
    // Deleting one mechanism: that one no longer logs in, the other still does.
    admin
        .alter_user_scram_credentials("carol", &[], &[ScramMechanism::Sha512])
        .await
        .unwrap();
    assert!(connect(sasl, "SCRAM-SHA-512", "carol", "c-secret")
        .await
        .is_err());
    connect(sasl, "SCRAM-SHA-256", "carol", "c-secret")
        .await
        .unwrap();
    // Kafka's refusals, nothing changed.
    for (upsertions, deletions, code, message) in [
        (
            vec![(ScramMechanism::Sha256, 100, "x".to_owned())],
            vec![],
            93,
            "Too few iterations",
        ),
        (
            vec![(ScramMechanism::Sha256, 20000, "x".to_owned())],
            vec![],
            93,
            "Too many iterations",
        ),
        (
            vec![],
            vec![ScramMechanism::Sha512],
            91,
            "Attempt to delete a user credential that does not exist",
        ),
        (
            vec![(ScramMechanism::Sha256, 4096, "x".to_owned())],
            vec![ScramMechanism::Sha256],
            92,
            "A user credential cannot be altered twice in the same request",
        ),
    ] {
        let err = admin
            .alter_user_scram_credentials("carol", &upsertions, &deletions)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(code), "{err}");
        assert!(err.to_string().contains(message), "{err}");
    }
    connect(sasl, "SCRAM-SHA-256", "carol", "c-secret")
        .await
        .unwrap();
    let described = admin
        .describe_user_scram_credentials(&["carol".to_owned(), "dave".to_owned()])
        .await
        .unwrap();
    assert_eq!(
        described[0].1.as_ref().unwrap(),
        &vec![("SCRAM-SHA-256".to_owned(), 8192)]
    );
    let err = described[1].1.as_ref().unwrap_err();
    assert_eq!(err.code(), Some(91));
    assert!(err
        .to_string()
        .contains("Attempt to describe a user credential that does not exist: dave"));
    broker.shutdown().await;
}
