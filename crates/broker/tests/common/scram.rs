//! A SCRAM-SHA-256 client (RFC 5802) for the SASL tests: the client side of
//! the exchange, computed from the password as Kafka clients compute it.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

pub fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("any key length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// RFC 5802's Hi(): PBKDF2-HMAC-SHA-256, one block.
pub fn salted_password(password: &str, salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut first = salt.to_vec();
    first.extend_from_slice(&1u32.to_be_bytes());
    let mut u = hmac(password.as_bytes(), &first);
    let mut out = u;
    for _ in 1..iterations {
        u = hmac(password.as_bytes(), &u);
        out.iter_mut().zip(u).for_each(|(o, x)| *o ^= x);
    }
    out
}

pub struct ScramClient {
    password: String,
    client_first_bare: String,
    server_key: Option<[u8; 32]>,
    auth_message: String,
}

impl ScramClient {
    /// `user` as Kafka clients send it: `,` and `=` escaped.
    pub fn new(user: &str, password: &str) -> (ScramClient, String) {
        ScramClient::with_extensions(user, password, "")
    }

    /// With `extensions` after the nonce (`,tokenauth=true` for a
    /// delegation token, as Kafka's `ScramExtensions`).
    pub fn with_extensions(user: &str, password: &str, extensions: &str) -> (ScramClient, String) {
        let escaped = user.replace('=', "=3D").replace(',', "=2C");
        let bare = format!("n={escaped},r=fyko+d2lbbFgONRv9qkxdawL{extensions}");
        let client = ScramClient {
            password: password.into(),
            client_first_bare: bare.clone(),
            server_key: None,
            auth_message: String::new(),
        };
        (client, format!("n,,{bare}"))
    }

    /// (salt, iterations) of a server-first message, and the client-final message.
    pub fn respond(&mut self, server_first: &str) -> (Vec<u8>, u32, String) {
        let attribute = |name: &str| {
            server_first.split(',').find_map(|a| a.strip_prefix(name)).map(str::to_owned).expect("attribute")
        };
        let nonce = attribute("r=");
        assert!(nonce.starts_with("fyko+d2lbbFgONRv9qkxdawL") && nonce.len() > 30, "{nonce}");
        let salt = BASE64.decode(attribute("s=")).expect("salt is base64");
        let iterations: u32 = attribute("i=").parse().expect("iterations");
        let salted = salted_password(&self.password, &salt, iterations);
        let client_key = hmac(&salted, b"Client Key");
        let stored_key: [u8; 32] = Sha256::digest(client_key).into();
        let without_proof = format!("c=biws,r={nonce}");
        self.auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let signature = hmac(&stored_key, self.auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(signature).map(|(k, s)| k ^ s).collect();
        self.server_key = Some(hmac(&salted, b"Server Key"));
        (salt, iterations, format!("{without_proof},p={}", BASE64.encode(proof)))
    }

    /// Checks the server's signature: the server knew the credential.
    pub fn verify(&self, server_final: &str) {
        let key = self.server_key.expect("responded first");
        let expected = format!("v={}", BASE64.encode(hmac(&key, self.auth_message.as_bytes())));
        assert_eq!(server_final, expected, "server signature");
    }
}
