//! A TCP forwarder between the sidecar and the devhost that can take the host "down"
//! (its port closed: connection refused, open connections cut) and bring it back on the
//! same port, so an outage can end while the sidecar keeps its configuration.

use std::sync::{Arc, Mutex};

use openwop_mcp_sidecar::config::Config;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub struct Outage {
    addr: std::net::SocketAddr,
    target: Arc<Mutex<String>>,
    up: watch::Sender<bool>,
}

impl Outage {
    /// Starts the forwarder on a free loopback port; it forwards once [`Outage::route`] has
    /// named the host, and stops when the `Outage` is dropped.
    pub fn start() -> Outage {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let target = Arc::new(Mutex::new(String::new()));
        let (up, rx) = watch::channel(true);
        tokio::spawn(forward(addr, target.clone(), rx));
        Outage { addr, target, up }
    }

    /// Points the sidecar's `upstream.url` at the forwarder, and the forwarder at the host
    /// `upstream.url` named.
    pub fn route(&self, c: &mut Config) {
        *self.target.lock().unwrap() = c.upstream.url.trim_start_matches("http://").to_string();
        c.upstream.url = format!("http://{}", self.addr);
    }

    pub fn down(&self) {
        self.up.send_replace(false);
    }

    pub fn up(&self) {
        self.up.send_replace(true);
    }
}

async fn forward(
    addr: std::net::SocketAddr,
    target: Arc<Mutex<String>>,
    mut up: watch::Receiver<bool>,
) {
    let mut listener = Some(TcpListener::bind(addr).await.unwrap());
    loop {
        match listener.take() {
            Some(l) => {
                let mut conns = JoinSet::new();
                loop {
                    tokio::select! {
                        a = l.accept() => if let Ok((mut inbound, _)) = a {
                            let to = target.lock().unwrap().clone();
                            conns.spawn(async move {
                                if let Ok(mut out) = TcpStream::connect(to).await {
                                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                                }
                            });
                        },
                        Some(_) = conns.join_next(), if !conns.is_empty() => {}
                        r = up.changed() => {
                            if r.is_err() {
                                return;
                            }
                            if !*up.borrow() {
                                break;
                            }
                        }
                    }
                }
                drop(l);
                conns.shutdown().await;
            }
            None => {
                while !*up.borrow_and_update() {
                    if up.changed().await.is_err() {
                        return;
                    }
                }
                listener = Some(TcpListener::bind(addr).await.unwrap());
            }
        }
    }
}
