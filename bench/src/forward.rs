#![forbid(unsafe_code)]
//! `openwop-bench-forward serve --upstream URL --listen ADDR`: the floor the sidecar's CPU
//! per request is compared with. A bare hyper 1 HTTP/1.1 server that forwards
//! every request, unchanged but for its target and `Host`, to the host through hyper-util's
//! pooled legacy client, and streams the answer back. Nothing else: no routing, no header
//! rewriting beyond `Host`, no logging, no metrics, no timeouts.
//!
//! It is one hop done as cheaply as these crates do it, so "the sidecar's CPU per request ÷
//! this binary's" says what the sidecar adds over a proxy built from the same parts, on any
//! machine. Same runtime as the sidecar (tokio multi-thread, one worker per CPU), same socket
//! options (`TCP_NODELAY` both ways), the same client pool settings as its passthrough
//! (src/passthrough.rs). The command line mirrors the sidecar's so the bench starts both alike
//! (`--config` is accepted and ignored).

use std::convert::Infallible;
use std::net::SocketAddr;

use http::{header, Request, Response, Uri};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

type Upstream = Client<HttpConnector, Incoming>;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(upstream), Some(listen)) = (arg(&args, "--upstream"), arg(&args, "--listen")) else {
        eprintln!("usage: openwop-bench-forward serve --upstream http://HOST:PORT --listen ADDR");
        return std::process::ExitCode::FAILURE;
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve(&upstream, &listen)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve(upstream: &str, listen: &str) -> anyhow::Result<()> {
    let up: Uri = upstream.parse()?;
    let scheme = up.scheme().cloned().unwrap_or(http::uri::Scheme::HTTP);
    let authority = up
        .authority()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("--upstream has no host"))?;
    let host = http::HeaderValue::from_str(authority.as_str())?;
    let mut conn = HttpConnector::new();
    conn.set_nodelay(true);
    let client: Upstream = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(std::time::Duration::from_secs(60))
        .pool_max_idle_per_host(256)
        .build(conn);
    let addr: SocketAddr = listen.parse()?;
    let listener = TcpListener::bind(addr).await?;
    println!(
        "openwop-bench-forward listening on http://{}",
        listener.local_addr()?
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        let (stream, _) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => continue,
            },
            _ = term.recv() => return Ok(()),
        };
        let _ = stream.set_nodelay(true);
        let client = client.clone();
        let (scheme, authority, host) = (scheme.clone(), authority.clone(), host.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |mut req: Request<Incoming>| {
                let client = client.clone();
                let mut parts = http::uri::Parts::default();
                parts.scheme = Some(scheme.clone());
                parts.authority = Some(authority.clone());
                parts.path_and_query = req.uri().path_and_query().cloned();
                let uri = Uri::from_parts(parts);
                req.headers_mut().insert(header::HOST, host.clone());
                async move {
                    let resp = match uri {
                        Ok(u) => {
                            *req.uri_mut() = u;
                            client.request(req).await.ok()
                        }
                        Err(_) => None,
                    };
                    Ok::<_, Infallible>(match resp {
                        Some(r) => r.map(Either::Up),
                        None => {
                            let mut r = Response::new(Either::Empty);
                            *r.status_mut() = http::StatusCode::BAD_GATEWAY;
                            r
                        }
                    })
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// The host's answer body as it arrives, or nothing (502).
enum Either {
    Up(Incoming),
    Empty,
}

impl hyper::body::Body for Either {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        match self.get_mut() {
            Either::Up(b) => std::pin::Pin::new(b).poll_frame(cx),
            Either::Empty => std::task::Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Either::Up(b) => b.is_end_stream(),
            Either::Empty => true,
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            Either::Up(b) => b.size_hint(),
            Either::Empty => hyper::body::SizeHint::with_exact(0),
        }
    }
}
