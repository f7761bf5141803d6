//! TLS on the listener (reloaded when its files change) and to the upstream (custom
//! CA bundle, client certificate), with certificates made in the test.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use openwop_mcp_sidecar::config::Config;
use openwop_mcp_sidecar::server::Server;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use serde_json::json;

use crate::support::*;

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

/// A certificate for 127.0.0.1 and localhost signed by `ca`: (cert PEM, key PEM).
fn leaf(ca: &CertifiedIssuer<'static, KeyPair>) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&key, ca)
        .unwrap();
    (cert.pem(), key.serialize_pem())
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("owsc-tls-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn client_trusting(ca: &CertifiedIssuer<'static, KeyPair>) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .no_proxy()
        .build()
        .unwrap()
}

#[tokio::test]
async fn listener_serves_tls_and_picks_up_a_new_certificate() {
    let dir = tmpdir("listener");
    let (ca1, ca2) = (ca("ca-one"), ca("ca-two"));
    let (c1, k1) = leaf(&ca1);
    let cert = write(&dir, "tls.crt", &c1);
    let key = write(&dir, "tls.key", &k1);
    let env = env_with(|c| {
        c.tls = Some((cert.clone(), key.clone()));
        c.reload_poll = Duration::from_millis(100);
    })
    .await;
    let base = env.url.replace("http://", "https://");
    let c1client = client_trusting(&ca1);
    assert_eq!(
        c1client
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let body = body_of(1, "tools/list", json!({}), json!({}));
    let r = c1client
        .post(format!("{base}/mcp"))
        .header("Authorization", format!("Bearer {A}"))
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "tools/list")
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let doc: serde_json::Value = c1client
        .get(format!("{base}/.well-known/openwop"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        doc["mcp"]["serverUrls"][0]
            .as_str()
            .unwrap()
            .starts_with("https://"),
        "{doc}"
    );
    assert!(
        reqwest::Client::new()
            .get(format!("{}/healthz", env.url))
            .send()
            .await
            .is_err(),
        "plain HTTP is not served"
    );
    // Rotate: a certificate from another CA replaces the first without a restart.
    let (c2, k2) = leaf(&ca2);
    std::fs::write(&key, k2).unwrap();
    std::fs::write(&cert, c2).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if client_trusting(&ca2)
            .get(format!("{base}/healthz"))
            .send()
            .await
            .is_ok()
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        client_trusting(&ca1)
            .get(format!("{base}/healthz"))
            .send()
            .await
            .is_err(),
        "the old certificate is gone"
    );
    env.shutdown().await;
}

/// On the TLS listener, as on the plain one (tests/it/limits.rs): a client that
/// connects and never sends a byte, or completes the handshake and then sends nothing, gets no
/// more time than a slow request head (`limits.headerReadTimeoutMs`), not a fixed handshake
/// allowance.
#[tokio::test]
async fn a_silent_tls_client_is_closed_within_the_header_read_timeout() {
    use tokio::io::AsyncReadExt;
    let dir = tmpdir("silent");
    let ca1 = ca("ca-silent");
    let (c1, k1) = leaf(&ca1);
    let cert = write(&dir, "tls.crt", &c1);
    let key = write(&dir, "tls.key", &k1);
    let env = env_with(|c| {
        c.tls = Some((cert.clone(), key.clone()));
        c.limits.header_read_timeout = Duration::from_millis(300);
    })
    .await;
    let addr = env.url.strip_prefix("http://").unwrap().to_string();
    let mut buf = [0u8; 64];
    // Not a byte, not even a ClientHello.
    let started = std::time::Instant::now();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .expect("the sidecar closed the silent connection")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // A complete handshake, then no request.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca1.der().clone()).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(client))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await
        .expect("the handshake completes");
    let started = std::time::Instant::now();
    let n = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf))
        .await
        .expect("the sidecar closed the connection that sent no request")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // A client that does send its request is served as before.
    let base = env.url.replace("http://", "https://");
    let r = client_trusting(&ca1)
        .get(format!("{base}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    env.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TLS terminator requiring a client certificate from `ca`, in front of `upstream`,
/// offering `alpn` (none: it selects no protocol).
async fn mtls_terminator(
    ca: &CertifiedIssuer<'static, KeyPair>,
    upstream: std::net::SocketAddr,
    alpn: Vec<Vec<u8>>,
) -> std::net::SocketAddr {
    use rustls::pki_types::pem::PemObject;
    let (cert, key) = leaf(ca);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
            rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
        )
        .unwrap();
    cfg.alpn_protocols = alpn;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(s).await else {
                    return;
                };
                let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn upstream_tls_with_a_private_ca_and_a_client_certificate() {
    let dir = tmpdir("upstream");
    let ca = ca("private-ca");
    let (cc, ck) = leaf(&ca);
    let ca_file = write(&dir, "ca.pem", &ca.pem());
    let client_cert = write(&dir, "client.crt", &cc);
    let client_key = write(&dir, "client.key", &ck);
    let host = openwop_devhost::spawn(Default::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let term = mtls_terminator(&ca, host.addr(), vec![]).await;
    let start = |with_cert: bool| {
        let mut cfg = Config::defaults();
        cfg.listen = "127.0.0.1:0".parse().unwrap();
        cfg.upstream.url = format!("https://127.0.0.1:{}", term.port());
        cfg.upstream.ca_file = Some(ca_file.clone());
        if with_cert {
            cfg.upstream.client_cert = Some((client_cert.clone(), client_key.clone()));
        }
        Server::start(cfg)
    };
    let ok = start(true).await.unwrap();
    let http = reqwest::Client::new();
    let r = http
        .get(format!("http://{}/runs?limit=1", ok.addr))
        .header("Authorization", format!("Bearer {A}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "passthrough over mutual TLS");
    let body = body_of(
        1,
        "tools/call",
        json!({"name":"conformance-noop","arguments":{}}),
        json!({}),
    );
    let r: serde_json::Value = http
        .post(format!("http://{}/mcp", ok.addr))
        .header("Authorization", format!("Bearer {A}"))
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "conformance-noop")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        r["result"]["isError"], false,
        "the MCP mount over mutual TLS: {r}"
    );
    ok.shutdown().await;
    let no_cert = start(false).await.unwrap();
    let r = http
        .get(format!("http://{}/runs?limit=1", no_cert.addr))
        .header("Authorization", format!("Bearer {A}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        502,
        "without the client certificate the host refuses the handshake"
    );
    no_cert.shutdown().await;
    host.shutdown().await;
}

/// One blocking tools/call through the sidecar at `addr`.
async fn noop_call(http: &reqwest::Client, addr: std::net::SocketAddr) -> serde_json::Value {
    let body = body_of(
        1,
        "tools/call",
        json!({"name":"conformance-noop","arguments":{}}),
        json!({}),
    );
    http.post(format!("http://{addr}/mcp"))
        .header("Authorization", format!("Bearer {A}"))
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "conformance-noop")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn upstream_http2_over_tls_takes_h2_from_alpn_and_refuses_a_host_without_it() {
    let dir = tmpdir("upstream-h2");
    let ca = ca("private-ca-h2");
    let (cc, ck) = leaf(&ca);
    let ca_file = write(&dir, "ca.pem", &ca.pem());
    let client_cert = write(&dir, "client.crt", &cc);
    let client_key = write(&dir, "client.key", &ck);
    let host = openwop_devhost::spawn(Default::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let h2 = mtls_terminator(&ca, host.addr(), vec![b"h2".to_vec(), b"http/1.1".to_vec()]).await;
    let h1_only = mtls_terminator(&ca, host.addr(), vec![b"http/1.1".to_vec()]).await;
    let start = |port: u16| {
        let mut cfg = Config::defaults();
        cfg.listen = "127.0.0.1:0".parse().unwrap();
        cfg.upstream.url = format!("https://127.0.0.1:{port}");
        cfg.upstream.ca_file = Some(ca_file.clone());
        cfg.upstream.client_cert = Some((client_cert.clone(), client_key.clone()));
        cfg.upstream.http2 = true;
        Server::start(cfg)
    };
    let http = reqwest::Client::new();
    let ok = start(h2.port()).await.unwrap();
    let r = noop_call(&http, ok.addr).await;
    assert_eq!(
        r["result"]["isError"], false,
        "MCP over h2 and mutual TLS: {r}"
    );
    let own: Vec<_> = host
        .requests()
        .into_iter()
        .filter(|r| r.header("x-forwarded-for").is_none())
        .collect();
    assert!(!own.is_empty());
    assert!(
        own.iter().all(|r| r.version == http::Version::HTTP_2),
        "{own:?}"
    );
    ok.shutdown().await;
    // A host that does not select h2 is refused, not spoken HTTP/1.1 to behind the operator's
    // back; the call fails with an error at once instead of hanging.
    let refused = start(h1_only.port()).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(20), noop_call(&http, refused.addr))
        .await
        .expect("an answer, not a hang");
    assert!(r.get("error").is_some(), "{r}");
    // Passthrough is not the REST client: it keeps HTTP/1.1 and still works.
    let p = http
        .get(format!("http://{}/runs?limit=1", refused.addr))
        .header("Authorization", format!("Bearer {A}"))
        .send()
        .await
        .unwrap();
    assert_eq!(p.status(), 200);
    refused.shutdown().await;
    host.shutdown().await;
}
