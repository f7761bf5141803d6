//! TLS: the listener's certificate (reloaded when its files change) and the client
//! configuration for an `https://` upstream (custom CA bundle, optional client certificate).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{}: no PEM certificate in the file", path.display());
    }
    Ok(certs)
}

fn key(path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| anyhow::anyhow!("{}: no usable PEM private key: {e}", path.display()))
}

fn server_config(cert: &Path, key_file: &Path) -> anyhow::Result<rustls::ServerConfig> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs(cert)?, key(key_file)?)?;
    // hyper-util's auto builder serves both; ALPN lets clients pick h2.
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

fn digest(paths: &[&Path]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in paths {
        std::fs::read(p).unwrap_or_default().hash(&mut h);
    }
    h.finish()
}

/// The listener's TLS, swapped atomically when the certificate or key file changes (new
/// handshakes use the new certificate; established connections keep theirs).
pub struct ServerTls {
    acceptor: ArcSwap<TlsAcceptor>,
    cert: PathBuf,
    key: PathBuf,
    digest: AtomicU64,
}

impl ServerTls {
    pub fn load(cert: &Path, key: &Path) -> anyhow::Result<ServerTls> {
        let cfg = server_config(cert, key)?;
        Ok(ServerTls {
            acceptor: ArcSwap::from_pointee(TlsAcceptor::from(Arc::new(cfg))),
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            digest: AtomicU64::new(digest(&[cert, key])),
        })
    }

    pub fn acceptor(&self) -> Arc<TlsAcceptor> {
        self.acceptor.load_full()
    }

    /// Reloads when the files changed; a broken pair is refused and the old one kept.
    pub fn reload_if_changed(&self) -> Option<Result<(), String>> {
        let d = digest(&[&self.cert, &self.key]);
        if d == self.digest.load(Ordering::SeqCst) {
            return None;
        }
        self.digest.store(d, Ordering::SeqCst);
        Some(match server_config(&self.cert, &self.key) {
            Ok(cfg) => {
                self.acceptor
                    .store(Arc::new(TlsAcceptor::from(Arc::new(cfg))));
                tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded");
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "TLS certificate reload refused; the previous certificate keeps serving");
                Err(e.to_string())
            }
        })
    }
}

/// The TLS client configuration for the upstream: the public web roots plus an optional CA
/// bundle (private PKI), and an optional client certificate (mutual TLS).
/// The TLS client settings for the host (`upstream.caFile`, `upstream.clientCert`), shared by
/// the passthrough pool and the HTTP/2 host pool so both trust and present the same things.
pub fn upstream_client_config(cfg: &crate::config::Config) -> anyhow::Result<rustls::ClientConfig> {
    client_config(
        cfg.upstream.ca_file.as_deref(),
        cfg.upstream
            .client_cert
            .as_ref()
            .map(|(c, k)| (c.as_path(), k.as_path())),
    )
}

pub fn client_config(
    ca: Option<&Path>,
    client: Option<(&Path, &Path)>,
) -> anyhow::Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(ca) = ca {
        for c in certs(ca)? {
            roots
                .add(c)
                .map_err(|e| anyhow::anyhow!("{}: {e}", ca.display()))?;
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    // No ALPN here: the passthrough connector sets its own (and refuses a preset one), and
    // without it the API client speaks HTTP/1.1, which every host serves.
    Ok(match client {
        Some((cert, k)) => builder.with_client_auth_cert(certs(cert)?, key(k)?)?,
        None => builder.with_no_client_auth(),
    })
}
