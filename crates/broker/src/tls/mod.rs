//! TLS for the SSL and SASL_SSL listeners (rustls, TLS 1.2 and 1.3 only).
//!
//! Owns loading the server certificate, its key and the client CA from PEM
//! files, the client-certificate policy (Kafka's `ssl.client.auth`), the
//! handshake of an accepted connection, and reading a client certificate's
//! subject as a Postgres role name ([`subject`]). A reload replaces the
//! configuration new handshakes use; established connections keep theirs.
//! What a certificate's role may do is the authorizer's; whether it may log
//! in is the catalog's. Never falls back to plain text: a listener whose TLS
//! cannot be loaded refuses every connection until a reload loads it.

pub mod subject;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::TcpStream;

/// Kafka's `ssl.client.auth`: whether clients must present a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No certificate is asked for.
    None,
    /// Asked for; a client without one connects as `User:ANONYMOUS`.
    Requested,
    /// A client without a certificate the CA signed fails the handshake.
    Required,
}

impl ClientAuth {
    pub fn name(self) -> &'static str {
        match self {
            ClientAuth::None => "none",
            ClientAuth::Requested => "requested",
            ClientAuth::Required => "required",
        }
    }
}

/// Where the TLS material is and what is asked of clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// The CAs client certificates must chain to; needed unless
    /// `client_auth` is [`ClientAuth::None`].
    pub ca_file: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the {what} {path}: {source}")]
    Pem { what: &'static str, path: PathBuf, source: rustls::pki_types::pem::Error },
    #[error("the {what} {path} holds no certificate")]
    NoCertificate { what: &'static str, path: PathBuf },
    #[error("ssl_client_auth = {0} needs a CA file for client certificates (kafgres.ssl_ca_file)")]
    NoCa(&'static str),
    #[error("the client CA file {path}: {source}")]
    Ca { path: PathBuf, source: rustls::Error },
    #[error("client certificates cannot be verified with {path}: {source}")]
    ClientVerifier { path: PathBuf, source: rustls::server::VerifierBuilderError },
    #[error("the certificate {cert} and key {key} do not make a TLS server: {source}")]
    Server { cert: PathBuf, key: PathBuf, source: rustls::Error },
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = |source| TlsError::Pem { what, path: path.to_owned(), source };
    let certs = CertificateDer::pem_file_iter(path).map_err(pem)?.collect::<Result<Vec<_>, _>>().map_err(pem)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { what, path: path.to_owned() });
    }
    Ok(certs)
}

/// The two server configurations the files make: an SSL listener's, which
/// asks for client certificates as `client_auth` says, and a SASL_SSL
/// listener's, which never does (SASL decides who the client is, and
/// Kafka's broker-wide `ssl.client.auth` does not apply to SASL_SSL
/// listeners either).
#[derive(Debug, Clone)]
pub struct ServerConfigs {
    pub ssl: Arc<ServerConfig>,
    pub sasl_ssl: Arc<ServerConfig>,
}

/// Builds the rustls server configurations from the files named.
pub fn load(settings: &TlsSettings) -> Result<ServerConfigs, TlsError> {
    let ssl = server_config(settings, settings.client_auth)?;
    let sasl_ssl = match settings.client_auth {
        ClientAuth::None => Arc::clone(&ssl),
        _ => server_config(settings, ClientAuth::None)?,
    };
    Ok(ServerConfigs { ssl, sasl_ssl })
}

fn server_config(settings: &TlsSettings, client_auth: ClientAuth) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = provider();
    let chain = certificates("certificate", &settings.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&settings.key_file).map_err(|source| TlsError::Pem {
        what: "private key",
        path: settings.key_file.clone(),
        source,
    })?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|source| TlsError::Server {
            cert: settings.cert_file.clone(),
            key: settings.key_file.clone(),
            source,
        })?;
    let builder = match client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let ca_file = settings.ca_file.as_deref().ok_or(TlsError::NoCa(auth.name()))?;
            let mut roots = RootCertStore::empty();
            for ca in certificates("client CA file", ca_file)? {
                roots.add(ca).map_err(|source| TlsError::Ca { path: ca_file.to_owned(), source })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match auth {
                ClientAuth::Requested => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier =
                verifier.build().map_err(|source| TlsError::ClientVerifier { path: ca_file.to_owned(), source })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(chain, key).map_err(|source| TlsError::Server {
        cert: settings.cert_file.clone(),
        key: settings.key_file.clone(),
        source,
    })?;
    Ok(Arc::new(config))
}

/// The configuration TLS handshakes use now, replaced by a reload. It may
/// hold none (the files could not be loaded at start): the TLS listeners
/// are bound all the same and refuse every connection until a reload loads
/// the files, so fixing them needs no restart and nothing falls back to
/// plain text.
pub struct TlsContext {
    settings: RwLock<Option<TlsSettings>>,
    configs: RwLock<Option<ServerConfigs>>,
}

impl std::fmt::Debug for TlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsContext").field("settings", &self.settings()).finish_non_exhaustive()
    }
}

impl TlsContext {
    pub fn load(settings: TlsSettings) -> Result<TlsContext, TlsError> {
        let configs = load(&settings)?;
        Ok(TlsContext { settings: RwLock::new(Some(settings)), configs: RwLock::new(Some(configs)) })
    }

    /// No configuration yet: every handshake is refused until a reload.
    pub fn unloaded() -> TlsContext {
        TlsContext { settings: RwLock::new(None), configs: RwLock::new(None) }
    }

    /// The settings in force, `None` while nothing could be loaded.
    pub fn settings(&self) -> Option<TlsSettings> {
        self.settings.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Loads the files again (they may have been replaced under the same
    /// names). On an error the configuration in use stays.
    pub fn reload(&self, settings: TlsSettings) -> Result<(), TlsError> {
        let configs = load(&settings)?;
        *self.configs.write().unwrap_or_else(|p| p.into_inner()) = Some(configs);
        *self.settings.write().unwrap_or_else(|p| p.into_inner()) = Some(settings);
        Ok(())
    }

    /// The server side of the handshake on a connection accepted by an SSL
    /// listener (`sasl` false) or a SASL_SSL one; an error, without a byte
    /// sent, while no configuration is loaded.
    pub async fn accept(&self, stream: TcpStream, sasl: bool) -> std::io::Result<ServerTlsStream> {
        let configs = self.configs.read().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(configs) = configs else {
            return Err(std::io::Error::other(
                "the TLS listener has no certificate loaded (see the error logged at start); fix the settings and \
                 reload",
            ));
        };
        let config = if sasl { configs.sasl_ssl } else { configs.ssl };
        let socket = tokio::io::BufReader::with_capacity(SOCKET_READ_BYTES, stream);
        tokio_rustls::TlsAcceptor::from(config).accept(socket).await
    }
}

/// How much one read of a TLS connection's socket may take. rustls asks its
/// transport for at most 4 KiB at a time; reading the socket through a buffer
/// this size turns the four or more `read` calls of each 16 KiB TLS record
/// into a fraction of one.
const SOCKET_READ_BYTES: usize = 64 * 1024;

/// The most a TLS connection holds between its socket and the plaintext its
/// reader takes, counted as plaintext it can still give (TLS only adds
/// bytes, so each one held is at most one byte of plaintext): the socket
/// read buffer below rustls (`SOCKET_READ_BYTES`), and rustls 0.23's own,
/// whose deframer stops reading at a full record (`MAX_WIRE_SIZE`, 18,437
/// bytes), or at 64 KiB while it joins a handshake message, and whose
/// received plaintext stops reading above 16 KiB (so at most that plus one
/// record's). The connection's wake
/// threshold ([`crate::wake_threshold`]) counts none of it as still to come:
/// an underestimate here would leave a frame's last bytes unread.
pub const HELD_BELOW_PLAINTEXT_MAX: usize = SOCKET_READ_BYTES + 64 * 1024 + 2 * (16 * 1024 + 2048 + 5);

/// A TLS connection's stream: rustls over the buffered socket (writes go
/// straight through the buffer to the socket).
pub type ServerTlsStream = tokio_rustls::server::TlsStream<tokio::io::BufReader<TcpStream>>;

/// The DER of the certificate a client presented, if any.
pub fn peer_certificate(stream: &ServerTlsStream) -> Option<&[u8]> {
    stream.get_ref().1.peer_certificates().and_then(|chain| chain.first()).map(|c| c.as_ref())
}
