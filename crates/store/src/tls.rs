//! Connecting to a PostgreSQL server as libpq's `sslmode` asks.
//!
//! The `postgres` crate knows `sslmode=disable|prefer|require` and nothing of certificates;
//! libpq also knows `allow`, `verify-ca` and `verify-full`, and `sslrootcert`. This module
//! takes those two options out of the URL, hands the rest to `tokio_postgres::Config`, and makes
//! the connector that does what libpq would:
//!
//! | sslmode       | TLS                         | certificate checked                       |
//! |---------------|-----------------------------|-------------------------------------------|
//! | `disable`     | never                       | —                                         |
//! | `allow`       | only if plain text fails    | no                                        |
//! | `prefer` (default) | if the server offers it | no                                       |
//! | `require`     | always                      | no (the chain, if `sslrootcert` is given) |
//! | `verify-ca`   | always                      | the chain                                 |
//! | `verify-full` | always                      | the chain and the host name               |
//!
//! The chain is checked against `sslrootcert=FILE` (PEM), or, without it (or with
//! `sslrootcert=system`), the system's root certificates. TLS is rustls with the `ring`
//! provider (no system OpenSSL), behind the crate's `tls` feature. Built without it, the
//! modes that need TLS (`require`, `verify-ca`, `verify-full`) are refused before anything
//! is sent, never quietly downgraded to plain text; `allow` and `prefer` connect in plain
//! text, as a libpq built without SSL does.

use std::error::Error;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(s: &str) -> Option<SslMode> {
        Some(match s {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Whether a connection in this mode must be encrypted.
    fn needs_tls(self) -> bool {
        matches!(self, SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

/// The TLS options of a connection URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsOptions {
    pub(crate) mode: SslMode,
    /// `sslrootcert`: a PEM file, or `system`.
    pub(crate) root_cert: Option<String>,
}

/// Why a URL's TLS options cannot be honoured.
#[derive(Debug)]
pub(crate) struct TlsRefused(pub(crate) String);

impl std::fmt::Display for TlsRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl Error for TlsRefused {}

/// `%XX` escapes decoded, as the `postgres` crate decodes option values.
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Splits `sslmode` and `sslrootcert` off a URL: the URL the `postgres` crate is given, and
/// the options. An unknown `sslmode`, or one this build cannot honour, is refused.
pub(crate) fn split_options(url: &str) -> Result<(String, TlsOptions), TlsRefused> {
    let mut opts = TlsOptions { mode: SslMode::Prefer, root_cert: None };
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), opts));
    };
    let mut kept = Vec::new();
    for kv in query.split('&') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "sslmode" => {
                let v = percent_decode(v);
                opts.mode = SslMode::parse(&v).ok_or_else(|| {
                    TlsRefused(format!(
                        "unknown sslmode {v:?} (libpq's: disable, allow, prefer, require, verify-ca, verify-full)"
                    ))
                })?;
            }
            "sslrootcert" => opts.root_cert = Some(percent_decode(v)),
            _ => kept.push(kv),
        }
    }
    if !cfg!(feature = "tls") && opts.mode.needs_tls() {
        return Err(TlsRefused(format!(
            "sslmode={} needs TLS, and this schedlab was built without it: rebuild with the \
             cargo feature `tls` (`cargo build --release -p schedlab --features tls`), or, on a \
             network you trust, use sslmode=prefer or sslmode=disable",
            opts.mode.name()
        )));
    }
    let url = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok((url, opts))
}

/// Connects as `opts` asks, before `deadline` (the whole of it: every attempt `allow`
/// makes, TLS, authentication and start-up); `limit` is how long that was, for the message.
#[cfg(not(feature = "tls"))]
pub(crate) fn connect(
    rt: &tokio::runtime::Runtime,
    config: &mut tokio_postgres::Config,
    opts: &TlsOptions,
    deadline: std::time::Instant,
    limit: std::time::Duration,
) -> Result<crate::pg::Opened, Box<dyn Error + Send + Sync>> {
    // `split_options` refused the modes that need TLS; the others are plain text here.
    debug_assert!(!opts.mode.needs_tls());
    config.ssl_mode(tokio_postgres::config::SslMode::Disable);
    crate::pg::connect_with(rt, config, tokio_postgres::NoTls, deadline, limit)
}

/// Connects as `opts` asks, before `deadline` (the whole of it: every attempt `allow`
/// makes, TLS, authentication and start-up); `limit` is how long that was, for the message.
#[cfg(feature = "tls")]
pub(crate) fn connect(
    rt: &tokio::runtime::Runtime,
    config: &mut tokio_postgres::Config,
    opts: &TlsOptions,
    deadline: std::time::Instant,
    limit: std::time::Duration,
) -> Result<crate::pg::Opened, Box<dyn Error + Send + Sync>> {
    use crate::pg::connect_with;
    use rustls_impl::{connector, Check};
    use tokio_postgres::config::SslMode as Pg;
    match opts.mode {
        SslMode::Disable => {
            config.ssl_mode(Pg::Disable);
            connect_with(rt, config, tokio_postgres::NoTls, deadline, limit)
        }
        SslMode::Allow => {
            config.ssl_mode(Pg::Disable);
            match connect_with(rt, config, tokio_postgres::NoTls, deadline, limit) {
                Ok(c) => Ok(c),
                Err(plain) => {
                    config.ssl_mode(Pg::Require);
                    connect_with(rt, config, connector(Check::Nothing, None)?, deadline, limit)
                        .map_err(|tls| {
                            format!("in plain text: {plain}; then over TLS: {tls}").into()
                        })
                }
            }
        }
        SslMode::Prefer => {
            config.ssl_mode(Pg::Prefer);
            connect_with(rt, config, connector(Check::Nothing, None)?, deadline, limit)
        }
        SslMode::Require => {
            config.ssl_mode(Pg::Require);
            // As libpq: with a root certificate named, `require` checks the chain.
            let check = if opts.root_cert.is_some() { Check::Chain } else { Check::Nothing };
            connect_with(rt, config, connector(check, opts.root_cert.as_deref())?, deadline, limit)
        }
        SslMode::VerifyCa => {
            config.ssl_mode(Pg::Require);
            let tls = connector(Check::Chain, opts.root_cert.as_deref())?;
            connect_with(rt, config, tls, deadline, limit)
        }
        SslMode::VerifyFull => {
            config.ssl_mode(Pg::Require);
            let tls = connector(Check::ChainAndName, opts.root_cert.as_deref())?;
            connect_with(rt, config, tls, deadline, limit)
        }
    }
}

#[cfg(feature = "tls")]
mod rustls_impl {
    use std::error::Error;
    use std::sync::Arc;

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::client::WebPkiServerVerifier;
    use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
    use tokio_postgres_rustls::MakeRustlsConnect;

    use super::TlsRefused;

    /// What of the server's certificate is checked.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Check {
        /// Nothing (the handshake's signatures still are): encrypted, not authenticated.
        Nothing,
        /// That it chains to a trusted root.
        Chain,
        /// That, and that it names the host connected to.
        ChainAndName,
    }

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// The trusted roots: the PEM file `root_cert`, or the system's.
    fn roots(root_cert: Option<&str>) -> Result<RootCertStore, TlsRefused> {
        let mut roots = RootCertStore::empty();
        match root_cert {
            Some(file) if file != "system" => {
                let certs = CertificateDer::pem_file_iter(file)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| TlsRefused(format!("cannot read sslrootcert {file}: {e}")))?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(TlsRefused(format!(
                        "sslrootcert {file} holds no usable certificate"
                    )));
                }
            }
            _ => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err(TlsRefused(
                        "no system root certificates found to check the server's certificate \
                         against (install the ca-certificates package, or name one with \
                         sslrootcert=FILE)"
                            .into(),
                    ));
                }
            }
        }
        Ok(roots)
    }

    /// A connector that checks `check`.
    pub(crate) fn connector(
        check: Check,
        root_cert: Option<&str>,
    ) -> Result<MakeRustlsConnect, Box<dyn Error + Send + Sync>> {
        let provider = provider();
        let verifier: Arc<dyn ServerCertVerifier> = match check {
            Check::Nothing => Arc::new(EncryptOnly(provider.clone())),
            Check::Chain | Check::ChainAndName => {
                let webpki = WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots(root_cert)?),
                    provider.clone(),
                )
                .build()?;
                if check == Check::Chain {
                    Arc::new(ChainOnly(webpki))
                } else {
                    webpki
                }
            }
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(MakeRustlsConnect::new(config))
    }

    /// `require` without a root certificate: any certificate is taken, but the handshake
    /// must still be signed by its key (libpq's `require`: encrypted, not authenticated).
    #[derive(Debug)]
    struct EncryptOnly(Arc<CryptoProvider>);

    impl ServerCertVerifier for EncryptOnly {
        fn verify_server_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _server_name: &ServerName<'_>,
            _ocsp_response: &[u8],
            _now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }

    /// `verify-ca`: webpki's check with the host name left out. webpki checks the chain
    /// (and its validity dates and key usage) before the name, so a name mismatch is the
    /// only error that means the chain was good.
    #[derive(Debug)]
    struct ChainOnly(Arc<WebPkiServerVerifier>);

    impl ServerCertVerifier for ChainOnly {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp_response: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            match self.0.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ) {
                Err(rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                )) => Ok(ServerCertVerified::assertion()),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_the_url() {
        let (url, o) = split_options(
            "postgres://u@h/db?sslmode=prefer&application_name=x&sslrootcert=%2Fa%20b",
        )
        .unwrap();
        assert_eq!(url, "postgres://u@h/db?application_name=x");
        assert_eq!(o, TlsOptions { mode: SslMode::Prefer, root_cert: Some("/a b".into()) });
        let (url, o) = split_options("postgres://u@h/db").unwrap();
        assert_eq!((url.as_str(), o.mode), ("postgres://u@h/db", SslMode::Prefer));
        let (url, o) = split_options("postgres://u@h/db?sslmode=disable").unwrap();
        assert_eq!((url.as_str(), o.mode), ("postgres://u@h/db", SslMode::Disable));
    }

    #[test]
    fn an_unknown_sslmode_is_refused() {
        let e = split_options("postgres://u@h/db?sslmode=bogus").unwrap_err();
        assert!(e.0.contains("unknown sslmode \"bogus\""), "{e}");
    }

    #[test]
    fn modes_that_need_tls_are_refused_without_the_feature_and_kept_with_it() {
        for mode in ["require", "verify-ca", "verify-full"] {
            let r = split_options(&format!("postgres://u@h/db?sslmode={mode}"));
            if cfg!(feature = "tls") {
                assert_eq!(r.unwrap().1.mode.name(), mode);
            } else {
                let e = r.unwrap_err();
                assert!(e.0.contains(&format!("sslmode={mode} needs TLS")), "{e}");
                assert!(e.0.contains("feature `tls`"), "{e}");
            }
        }
    }
}
