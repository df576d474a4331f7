//! Listeners as Kafka names them: an address, a security protocol (whether
//! the connection is TLS, whether it must authenticate with SASL) and the
//! endpoint its clients are told to come back to.
//!
//! Owns the vocabulary and the parsing of `kafgres.listeners`
//! (`PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093`); binding and
//! accepting are the server's ([`crate::server`]), the TLS handshake is
//! [`crate::tls`]'s, authentication is [`crate::sasl`]'s.

use std::net::{IpAddr, SocketAddr};

use crate::config::Authentication;

/// Kafka's `security.protocol` of a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(name: &str) -> Option<SecurityProtocol> {
        match name.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn is_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn is_sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
}

/// One listener beyond the primary one (`BrokerConfig::listen`).
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    pub security: SecurityProtocol,
    pub listen: SocketAddr,
    /// What Metadata, FindCoordinator and DescribeCluster tell clients that
    /// came in on this listener (port 0: the bound port).
    pub advertised_host: String,
    pub advertised_port: u16,
    /// SASL on this listener (SCRAM-SHA-256, and PLAIN when it is TLS), or
    /// none.
    pub authentication: Authentication,
}

/// The endpoint a connection's clients are sent back to: its listener's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub security: SecurityProtocol,
    pub host: String,
    pub port: u16,
}

/// A listener as written in `kafgres.listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    pub security: SecurityProtocol,
    /// Empty: every address (as Kafka reads `PLAINTEXT://:9092`).
    pub host: String,
    pub port: u16,
}

impl ListenerSpec {
    /// The address to bind: the host must be an IP address (no name
    /// resolution at start), empty meaning every IPv4 address.
    pub fn bind_address(&self) -> Result<SocketAddr, String> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = match host {
            "" => IpAddr::from([0, 0, 0, 0]),
            h => h.parse().map_err(|_| {
                format!("listener {}://{}:{}: {h:?} is not an IP address", self.security.name(), self.host, self.port)
            })?,
        };
        Ok(SocketAddr::new(ip, self.port))
    }

    /// Whether the bound address is a wildcard, which cannot be advertised.
    pub fn is_wildcard(&self) -> bool {
        self.bind_address().is_ok_and(|a| a.ip().is_unspecified())
    }
}

/// Parses `kafgres.listeners`: comma-separated `PROTOCOL://host:port`, at
/// most one listener per port, each protocol one of Kafka's four.
pub fn parse_listeners(spec: &str) -> Result<Vec<ListenerSpec>, String> {
    let mut listeners: Vec<ListenerSpec> = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((protocol, address)) = item.split_once("://") else {
            return Err(format!("listener {item:?} is not PROTOCOL://host:port"));
        };
        let Some(security) = SecurityProtocol::parse(protocol) else {
            return Err(format!(
                "listener {item:?}: unknown security protocol {protocol:?} (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)"
            ));
        };
        let Some((host, port)) = address.rsplit_once(':') else {
            return Err(format!("listener {item:?} has no port"));
        };
        let port: u16 = match port.parse() {
            Ok(p) if p > 0 => p,
            _ => return Err(format!("listener {item:?}: {port:?} is not a port (1-65535)")),
        };
        let listener = ListenerSpec { security, host: host.to_owned(), port };
        listener.bind_address()?;
        if listeners.iter().any(|l| l.port == port) {
            return Err(format!("listener {item:?}: port {port} is used by another listener"));
        }
        listeners.push(listener);
    }
    Ok(listeners)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafkas_listener_syntax() {
        let parsed = parse_listeners("PLAINTEXT://127.0.0.1:9092, sasl_ssl://:9093,SSL://[::1]:9094").unwrap();
        assert_eq!(
            parsed,
            vec![
                ListenerSpec { security: SecurityProtocol::Plaintext, host: "127.0.0.1".into(), port: 9092 },
                ListenerSpec { security: SecurityProtocol::SaslSsl, host: "".into(), port: 9093 },
                ListenerSpec { security: SecurityProtocol::Ssl, host: "[::1]".into(), port: 9094 },
            ]
        );
        assert_eq!(parsed[1].bind_address().unwrap(), "0.0.0.0:9093".parse().unwrap());
        assert!(parsed[1].is_wildcard());
        assert_eq!(parsed[2].bind_address().unwrap(), "[::1]:9094".parse().unwrap());
        assert!(parse_listeners("").unwrap().is_empty());
    }

    #[test]
    fn refuses_what_it_cannot_bind_or_name() {
        for (spec, why) in [
            ("127.0.0.1:9092", "is not PROTOCOL"),
            ("TLS://127.0.0.1:9092", "unknown security protocol"),
            ("SSL://127.0.0.1", "has no port"),
            ("SSL://127.0.0.1:0", "is not a port"),
            ("SSL://127.0.0.1:99999", "is not a port"),
            ("SSL://localhost:9093", "is not an IP address"),
            ("SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9093", "used by another listener"),
        ] {
            let e = parse_listeners(spec).unwrap_err();
            assert!(e.contains(why), "{spec}: {e}");
        }
    }
}
