//! The sidecar as a real process: spawn, wait for `/readyz`, read its resident memory, stop.

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

pub struct Sidecar {
    child: Child,
    pub pid: u32,
    pub addr: SocketAddr,
    /// From `spawn` to the "listening on" line on stdout.
    pub to_listening: Duration,
    /// When `spawn` was called.
    pub spawned_at: Instant,
}

/// Starts `bin serve [--config FILE] --upstream URL --listen 127.0.0.1:0`, stderr (logs) to
/// `log`, and waits for the "listening on http://ADDR" line.
pub async fn spawn_sidecar(
    bin: &Path,
    upstream: &str,
    config: Option<&Path>,
    log: &Path,
    wrap: Option<&str>,
) -> anyhow::Result<Sidecar> {
    let logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("open {}", log.display()))?;
    let spawned_at = Instant::now();
    let mut cmd = match wrap {
        Some(w) => {
            let mut parts = w.split_whitespace();
            let mut c = Command::new(parts.next().context("empty --wrap")?);
            c.args(parts).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    cmd.arg("serve");
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    let mut child = cmd
        .args(["--upstream", upstream, "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(logf))
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("spawn {}", bin.display()))?;
    let pid = child.id().context("child pid")?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let addr = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(rest) = line.split("listening on http://").nth(1) {
                return rest
                    .trim()
                    .parse::<SocketAddr>()
                    .map_err(anyhow::Error::from);
            }
        }
        anyhow::bail!(
            "the sidecar exited before listening (see {})",
            log.display()
        )
    })
    .await
    .context("the sidecar did not print its address in 20 s")??;
    let to_listening = spawned_at.elapsed();
    // Keep draining stdout so the pipe never fills.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Sidecar {
        child,
        pid,
        addr,
        to_listening,
        spawned_at,
    })
}

impl Sidecar {
    /// SIGTERM twice (the second skips the lame duck, shutdown.lameDuckMs: no balancer here),
    /// then SIGKILL after `grace`.
    pub async fn stop(mut self, grace: Duration) {
        signal(self.pid, Signal::SIGTERM);
        tokio::time::sleep(Duration::from_millis(50)).await;
        signal(self.pid, Signal::SIGTERM);
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }

    pub fn mem(&self) -> Mem {
        mem(self.pid)
    }
}

fn signal(pid: u32, sig: Signal) {
    let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), sig);
}

/// What /proc says about a process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mem {
    pub rss_kb: u64,
    pub hwm_kb: u64,
    pub threads: u64,
    pub fds: u64,
}

pub fn mem(pid: u32) -> Mem {
    let mut m = Mem::default();
    if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
        for line in s.lines() {
            let num = || {
                line.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            if line.starts_with("VmRSS:") {
                m.rss_kb = num();
            } else if line.starts_with("VmHWM:") {
                m.hwm_kb = num();
            } else if line.starts_with("Threads:") {
                m.threads = num();
            }
        }
    }
    m.fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    m
}

/// One `GET path` on a fresh connection; the status code (0 when the connection failed).
pub async fn get_status(addr: SocketAddr, path: &str) -> u16 {
    let fut = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = [0u8; 64];
        let mut got = 0;
        while got < 12 {
            let n = s.read(&mut buf[got..]).await.ok()?;
            if n == 0 {
                break;
            }
            got += n;
        }
        let line = std::str::from_utf8(&buf[..got]).ok()?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// Polls `/readyz` every millisecond until it answers 200 (bounded by `limit`).
pub async fn wait_ready(addr: SocketAddr, limit: Duration) -> anyhow::Result<Instant> {
    let end = Instant::now() + limit;
    loop {
        if get_status(addr, "/readyz").await == 200 {
            return Ok(Instant::now());
        }
        if Instant::now() > end {
            anyhow::bail!("/readyz did not answer 200 within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The sidecar binary next to this one (same target directory), unless given.
pub fn default_sidecar_bin() -> PathBuf {
    next_to_self("openwop-mcp-sidecar")
}

/// The bare forward of the floor (bench/src/forward.rs), built next to this binary.
pub fn default_forward_bin() -> PathBuf {
    next_to_self("openwop-bench-forward")
}

fn next_to_self(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Raises this process's soft open-file limit to its hard limit (children inherit it).
pub fn raise_nofile() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 0;
    };
    let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    getrlimit(Resource::RLIMIT_NOFILE).map_or(0, |(soft, _)| soft)
}

/// Scheduler accounting of a set of threads: nanoseconds on a CPU and waiting on a run queue
/// (`/proc/.../schedstat`). The wait is the direct measure of CPU contention.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sched {
    pub on_cpu_ns: u64,
    pub wait_ns: u64,
}

impl Sched {
    pub fn since(self, before: Sched) -> Sched {
        Sched {
            on_cpu_ns: self.on_cpu_ns.saturating_sub(before.on_cpu_ns),
            wait_ns: self.wait_ns.saturating_sub(before.wait_ns),
        }
    }
}

fn sched_of_tasks(dir: &str, name_prefix: Option<&str>) -> Sched {
    let mut s = Sched::default();
    let Ok(d) = std::fs::read_dir(dir) else {
        return s;
    };
    for e in d.flatten() {
        let p = e.path();
        if let Some(prefix) = name_prefix {
            let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
            if !comm.trim_start().starts_with(prefix) {
                continue;
            }
        }
        let Ok(text) = std::fs::read_to_string(p.join("schedstat")) else {
            continue;
        };
        let mut it = text.split_whitespace();
        s.on_cpu_ns += it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        s.wait_ns += it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    }
    s
}

/// All threads of another process.
pub fn sched(pid: u32) -> Sched {
    sched_of_tasks(&format!("/proc/{pid}/task"), None)
}

/// This process's threads whose name starts with `prefix` ("devhost", "loadgen").
pub fn self_sched(prefix: &str) -> Sched {
    sched_of_tasks("/proc/self/task", Some(prefix))
}

/// CPU use of the sidecar, the in-process host and the load generator over one run.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuSplit {
    pub sidecar: Sched,
    pub host: Sched,
    pub loadgen: Sched,
}

impl CpuSplit {
    pub fn now(sidecar_pid: u32) -> CpuSplit {
        CpuSplit {
            sidecar: sched(sidecar_pid),
            host: self_sched("devhost"),
            loadgen: self_sched("loadgen"),
        }
    }
    pub fn since(self, before: CpuSplit) -> CpuSplit {
        CpuSplit {
            sidecar: self.sidecar.since(before.sidecar),
            host: self.host.since(before.host),
            loadgen: self.loadgen.since(before.loadgen),
        }
    }
}
