//! The HTTP client of `streamableHttp` servers, with TLS: rustls with the ring provider,
//! trusting the system's roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` when set, else the
//! platform's store, as `rustls-native-certs` finds them) plus a server's own `caFile`.
//! docs/https.md says why this stack and how to trust a private CA.

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

/// The client for a server whose `caFile` (already expanded) is `ca_file`. One client per CA
/// file, made on first use and shared by every server that trusts the same file: a client
/// owns a connection pool, and the system's roots are read once per client. A CA file that
/// cannot be used is not remembered, so the next call reads it again.
pub(crate) fn http_client(ca_file: Option<&Path>) -> Result<reqwest::Client, String> {
    static CLIENTS: LazyLock<Mutex<HashMap<Option<PathBuf>, reqwest::Client>>> =
        LazyLock::new(Mutex::default);
    let key = ca_file.map(Path::to_path_buf);
    if let Ok(clients) = CLIENTS.lock()
        && let Some(client) = clients.get(&key)
    {
        return Ok(client.clone());
    }
    let client = build(ca_file)?;
    if let Ok(mut clients) = CLIENTS.lock() {
        clients.entry(key).or_insert_with(|| client.clone());
    }
    Ok(client)
}

/// Why a TLS handshake failed, from rustls's error, in the user's terms: what is wrong with the
/// server's certificate, and for an unknown issuer, how to trust it.
pub(crate) fn tls_reason(error: &rustls::Error) -> String {
    use rustls::CertificateError as Cert;
    let rustls::Error::InvalidCertificate(cert) = error else {
        return format!("the TLS handshake failed: {error}");
    };
    match cert {
        Cert::UnknownIssuer => {
            let mut text = "the server's certificate is not signed by a trusted authority (unknown issuer); trust its CA with the server's caFile or SSL_CERT_FILE".to_string();
            if system_roots().is_empty() {
                text.push_str(" (no system roots were found)");
            }
            text
        }
        Cert::NotValidForName | Cert::NotValidForNameContext { .. } => {
            format!("the server's certificate does not name this host: {cert}")
        }
        Cert::Expired | Cert::ExpiredContext { .. } => {
            format!("the server's certificate has expired: {cert}")
        }
        Cert::NotValidYet | Cert::NotValidYetContext { .. } => {
            format!("the server's certificate is not valid yet: {cert}")
        }
        other => format!("the server's certificate was rejected: {other}"),
    }
}

/// The rustls error an I/O error wraps: the TLS stream reports a failed handshake as one
/// (which the connector wraps in another), and a wrapped error is not its `source`.
pub(crate) fn wrapped(io: &std::io::Error) -> Option<&rustls::Error> {
    let inner = io.get_ref()?;
    if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    wrapped(inner.downcast_ref::<std::io::Error>()?)
}

fn build(ca_file: Option<&Path>) -> Result<reqwest::Client, String> {
    client_builder(ca_file)?
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// A client builder with the TLS described above (the system's roots and `ca_file`), for
/// downstream servers and the OTLP exporter (telemetry.rs) alike.
pub(crate) fn client_builder(ca_file: Option<&Path>) -> Result<reqwest::ClientBuilder, String> {
    let mut roots = rustls::RootCertStore::empty();
    // A system root rustls cannot parse is skipped, as every TLS client does: one odd
    // certificate in /etc/ssl/certs must not make every HTTPS server unreachable.
    roots.add_parsable_certificates(system_roots().iter().cloned());
    if let Some(path) = ca_file {
        for cert in ca_certificates(path)? {
            roots.add(cert).map_err(|e| {
                format!(
                    "caFile {} holds a certificate that cannot be a CA: {e}",
                    path.display()
                )
            })?;
        }
    }
    // The provider is passed, not installed process-wide: a program embedding the runtime
    // (`graph!`) keeps its own choice of default.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot configure TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // As rmcp's own client (its `from_config`): no idle connections kept (the delayed-ACK
    // stalls of a reused connection whose last body was not read to the end), and only the
    // redirects that keep the message and its headers where they were sent.
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .pool_max_idle_per_host(0)
        .redirect(same_origin_redirects()))
}

/// The system's roots, read once per process. Problems (an `SSL_CERT_FILE` that cannot be read)
/// are logged: the caFile of a server may still make it reachable.
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: LazyLock<Vec<CertificateDer<'static>>> = LazyLock::new(|| {
        let found = rustls_native_certs::load_native_certs();
        for error in &found.errors {
            tracing::warn!(target: "mcpgraph::downstream", "system CA certificates: {error}");
        }
        found.certs
    });
    &ROOTS
}

/// The certificates of a PEM file; an error when it cannot be read or holds none.
fn ca_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = std::fs::read(path).map_err(|e| {
        let reason = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => e.to_string(),
        };
        format!("cannot read caFile {}: {reason}", path.display())
    })?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("caFile {} is not a PEM file: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "caFile {} holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

/// rmcp's redirect policy for its default client: same-origin 307 and 308 only (they keep the
/// method and body), at most 10 hops. A 301-303 would turn the POST into a bodyless GET, and
/// another origin would get the session id and the configured headers.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    const MAX_REDIRECTS: usize = 10;
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("exceeded {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}
