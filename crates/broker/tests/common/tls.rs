//! TLS for the integration tests: a CA and certificates made with rcgen, the
//! broker's TLS files in a temporary directory, a broker with extra
//! listeners, a rustls client, and the two SASL requests.

use std::path::PathBuf;
use std::sync::Arc;

use kafgres_broker::listener::{ListenerConfig, SecurityProtocol};
use kafgres_broker::sasl::Authentication;
use kafgres_broker::tls::{ClientAuth, TlsSettings};
use kafgres_broker::{BrokerConfig, MemoryCatalog};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tempfile::TempDir;

use super::{Client, TestBroker, IO_TIMEOUT};

// ---------------------------------------------------------------- certificates

pub struct Ca {
    pub key: rcgen::KeyPair,
    pub cert: rcgen::Certificate,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("CA certificate");
        Ca { key, cert }
    }

    /// A leaf certificate: a server's for 127.0.0.1, or a client's named `cn`.
    pub fn issue(&self, cn: &str, server: bool) -> (rcgen::Certificate, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().expect("key");
        let names = if server { vec!["localhost".to_owned()] } else { Vec::new() };
        let mut params = rcgen::CertificateParams::new(names).expect("params");
        if server {
            params.subject_alt_names.push(rcgen::SanType::IpAddress([127, 0, 0, 1].into()));
            params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        } else {
            params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        }
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let cert = params.signed_by(&key, &self.cert, &self.key).expect("signed");
        (cert, key)
    }

    pub fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }
}

/// The broker's TLS files in a directory of their own.
pub struct ServerFiles {
    pub _dir: TempDir,
    pub settings: TlsSettings,
}

pub fn server_files(server_ca: &Ca, client_ca: Option<&Ca>, client_auth: ClientAuth) -> ServerFiles {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = server_ca.issue("kafgres test broker", true);
    let write = |name: &str, pem: String| -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).expect("write PEM");
        path
    };
    let cert_file = write("server.crt", cert.pem());
    let key_file = write("server.key", key.serialize_pem());
    let ca_file = client_ca.map(|ca| write("clients-ca.crt", ca.cert.pem()));
    ServerFiles { settings: TlsSettings { cert_file, key_file, ca_file, client_auth }, _dir: dir }
}

// ---------------------------------------------------------------- broker and client

pub fn listener(security: SecurityProtocol) -> ListenerConfig {
    let authentication = match security.is_sasl() {
        true => Authentication::scram_sha_256_random(),
        false => Authentication::None,
    };
    ListenerConfig {
        security,
        listen: "127.0.0.1:0".parse().expect("address"),
        advertised_host: "127.0.0.1".into(),
        advertised_port: 0,
        authentication,
    }
}

pub async fn start(catalog: Arc<MemoryCatalog>, tls: Option<TlsSettings>, extra: &[SecurityProtocol]) -> TestBroker {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    config.tls = tls;
    config.extra_listeners = extra.iter().map(|s| listener(*s)).collect();
    TestBroker::start_with(dir, catalog, config).await
}

pub fn client_config(
    trusted: &Ca,
    identity: Option<(&rcgen::Certificate, &rcgen::KeyPair)>,
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trusted.der()).expect("root");
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::try_from(key.serialize_der()).expect("client key"),
            )
            .expect("client certificate"),
    };
    Arc::new(config)
}

/// A TLS connection; the handshake's error if the broker refused it. A
/// client certificate refused is only seen at the first read under TLS 1.3.
pub async fn connect_tls(addr: std::net::SocketAddr, config: Arc<rustls::ClientConfig>) -> std::io::Result<Client> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let local = tcp.local_addr()?;
    let connector = tokio_rustls::TlsConnector::from(config);
    let name = ServerName::try_from("127.0.0.1").expect("server name");
    let stream = tokio::time::timeout(IO_TIMEOUT, connector.connect(name, tcp))
        .await
        .map_err(|_| std::io::Error::other("handshake timed out"))??;
    Ok(Client::over_stream(Box::new(stream), local))
}

pub async fn api_versions(client: &mut Client) -> Result<ApiVersionsResponse, String> {
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("tls-test"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    client.try_call(3, &request).await
}

pub fn tls_addr(broker: &TestBroker, security: SecurityProtocol) -> std::net::SocketAddr {
    broker.broker.listener_addr(security).expect("listener open")
}

pub async fn sasl_handshake(client: &mut Client, mechanism: &'static str) -> SaslHandshakeResponse {
    client.call(1, &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism))).await
}

pub async fn sasl_authenticate(client: &mut Client, token: &[u8]) -> Result<SaslAuthenticateResponse, String> {
    client.try_call(2, &SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::copy_from_slice(token))).await
}
