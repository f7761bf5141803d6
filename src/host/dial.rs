//! How the host pools reach the host (h1pool.rs, h2pool.rs): TCP with `TCP_NODELAY`, then for
//! an `https://` upstream TLS with the upstream's CA and client certificate
//! (`upstream.caFile`, `upstream.clientCert`) offering the pool's one ALPN protocol.

use std::sync::Arc;
use std::time::Duration;

use http::uri::Scheme;
use http::Uri;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

pub(super) struct Dialer {
    host: String,
    port: u16,
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
    /// `upstream.connectTimeoutMs`: for the connection and its handshakes together.
    pub(super) timeout: Duration,
}

/// A connection to the host, before its HTTP handshake.
pub(super) enum Dialed {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Dialer {
    /// The dialer of `upstream.url`; over TLS, `alpn` is the one protocol offered (RFC 7301).
    pub(super) fn new(cfg: &crate::config::Config, alpn: &[u8]) -> anyhow::Result<Dialer> {
        let uri: Uri = cfg.upstream.url.parse()?;
        let https = uri.scheme() == Some(&Scheme::HTTPS);
        let host = uri
            .host()
            .ok_or_else(|| anyhow::anyhow!("upstream URL has no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tls = if https {
            let mut tls = crate::tls::upstream_client_config(cfg)?;
            tls.alpn_protocols = vec![alpn.to_vec()];
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|e| anyhow::anyhow!("upstream host {host}: {e}"))?;
            Some((tokio_rustls::TlsConnector::from(Arc::new(tls)), name))
        } else {
            None
        };
        Ok(Dialer {
            host,
            port,
            tls,
            timeout: cfg.upstream.connect_timeout,
        })
    }

    /// One connection, TLS established when the upstream is `https://`; the error says why
    /// not (never the request's URL or credential).
    pub(super) async fn dial(&self) -> Result<Dialed, String> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => Ok(Dialed::Plain(tcp)),
            Some((tls, name)) => tls
                .connect(name.clone(), tcp)
                .await
                .map(|s| Dialed::Tls(Box::new(s)))
                .map_err(|e| e.to_string()),
        }
    }
}
