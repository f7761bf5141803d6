//! The multi-replica harness: the real demo host, N real sidecar processes sharing
//! one requestState key, and a real HAProxy in front of them, health-checking `/readyz` and
//! balancing round-robin, all on loopback ports.
//!
//! HAProxy comes from the system packages (`scripts/test` installs it); a missing `haproxy`
//! fails the tests with a message saying how to install it.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use openwop_devhost::DevHostConfig;

use crate::support::free_port;

use crate::support::Env;

pub const BIN: &str = env!("CARGO_BIN_EXE_openwop-mcp-sidecar");
/// The key every replica of a stack shares (`OPENWOP_SIDECAR_STATE_KEY`).
pub const SHARED_KEY: &str = "replicas-share-this-request-state-key";
/// The response header HAProxy adds: the name (`r0`, `r1`, …) of the replica that answered.
pub const REPLICA_HEADER: &str = "x-replica";

/// How the replicas shut down and how the balancer checks them; the default values keep a
/// rolling restart within seconds, `a_rolling_restart_with_the_charts_shutdown_timing_…` takes
/// them from the rendered Helm chart (docs/hardening.md, "Many replicas").
#[derive(Clone, Copy)]
pub struct Timings {
    pub lame_duck_ms: u64,
    pub drain_ms: u64,
    /// HAProxy `retries` (on connection failure only); 0 proves the replicas alone suffice.
    pub balancer_retries: u32,
    pub check: Check,
}

/// HAProxy's health check of `/readyz`, the balancer's readiness probe: a check every
/// `inter_ms` (Kubernetes `periodSeconds`), down after `fall` failures (`failureThreshold`),
/// up after `rise` successes (`successThreshold`), each check given `timeout_ms`
/// (`timeoutSeconds`; HAProxy's own default when `None`).
#[derive(Clone, Copy)]
pub struct Check {
    pub inter_ms: u64,
    pub fall: u32,
    pub rise: u32,
    pub timeout_ms: Option<u64>,
}

impl Default for Timings {
    fn default() -> Self {
        // Lame duck: more than HAProxy needs to mark a replica down (`inter 200ms fall 1`,
        // plus a check in flight), as the chart's lameDuckMs exceeds its readiness period.
        Timings {
            lame_duck_ms: 1_000,
            drain_ms: 3_000,
            balancer_retries: 2,
            check: Check {
                inter_ms: 200,
                fall: 1,
                rise: 1,
                timeout_ms: None,
            },
        }
    }
}

/// One sidecar process on a fixed loopback port (a restart reuses it, as a pod keeps its
/// Service endpoint name).
pub struct Replica {
    pub port: u16,
    config: PathBuf,
    upstream: String,
    key: String,
    log: PathBuf,
    pub child: Option<tokio::process::Child>,
    /// Kept open: a closed stdout pipe would fail the sidecar's writes.
    _stdout: Option<tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>>,
}

impl Replica {
    pub async fn start(
        port: u16,
        config: PathBuf,
        upstream: String,
        key: String,
        log: PathBuf,
    ) -> Replica {
        let mut r = Replica {
            port,
            config,
            upstream,
            key,
            log,
            child: None,
            _stdout: None,
        };
        r.spawn().await;
        r
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut child = tokio::process::Command::new(BIN)
            .arg("serve")
            .arg("--config")
            .arg(&self.config)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--upstream")
            .arg(&self.upstream)
            .env("OPENWOP_SIDECAR_STATE_KEY", &self.key)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .expect("the sidecar binary starts");
        let (_, lines) = crate::support::listening_base(&mut child).await;
        self.child = Some(child);
        self._stdout = Some(lines);
    }

    /// SIGTERM (what the kubelet sends); returns at once.
    pub fn sigterm(&self) {
        let pid = self.child.as_ref().and_then(|c| c.id()).expect("running");
        let ok = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -TERM {pid}");
    }

    /// SIGKILL (a lost node, an OOM kill): nothing runs after it.
    pub async fn sigkill(&mut self) {
        let mut c = self.child.take().expect("running");
        c.start_kill().unwrap();
        let _ = c.wait().await;
        self._stdout = None;
    }

    /// Waits for the process to exit; its exit status.
    pub async fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let c = self.child.as_mut().expect("running");
        let st = tokio::time::timeout(within, c.wait())
            .await
            .unwrap_or_else(|_| panic!("replica on {} did not exit within {within:?}", self.port))
            .unwrap();
        self.child = None;
        self._stdout = None;
        st
    }

    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "stop it first");
        self.spawn().await;
    }
}

pub struct Stack {
    /// Points at the balancer: every `Env` helper (rpc, call, rest_get, status…) goes
    /// through HAProxy. `env.host` is the demo host all replicas front.
    pub env: Env,
    pub replicas: Vec<Replica>,
    pub dir: PathBuf,
    haproxy: tokio::process::Child,
    stats: String,
}

pub fn haproxy_bin() -> String {
    // Debian installs it in /usr/sbin, which a non-root PATH may lack.
    for bin in ["haproxy", "/usr/sbin/haproxy"] {
        let found = std::process::Command::new(bin)
            .arg("-v")
            .output()
            .is_ok_and(|o| o.status.success());
        if found {
            return bin.into();
        }
    }
    panic!(
        "haproxy is not installed: the multi-replica tests need a real load balancer \
         (scripts/test installs it: apt-get update && apt-get install -y haproxy)"
    );
}

/// The sidecar configuration every replica loads.
pub fn sidecar_yaml(t: Timings) -> String {
    format!(
        "shutdown:\n  lameDuckMs: {}\n  drainTimeoutMs: {}\nownership:\n  cancelDeadlineMs: 5000\nmcp:\n  sseKeepaliveMs: 200\nlogging:\n  format: json\n",
        t.lame_duck_ms, t.drain_ms
    )
}

/// [`sidecar_yaml`] after the legacy host's mapping when the suite runs against it.
pub fn flavoured_yaml(t: Timings) -> String {
    if crate::support::legacy() {
        let legacy = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/legacy-host.example.yaml"
        ))
        .unwrap();
        format!("{legacy}\n{}", sidecar_yaml(t))
    } else {
        sidecar_yaml(t)
    }
}

/// The balancer. Why each line is there: docs/hardening.md, "Many replicas".
pub fn haproxy_cfg(front: u16, stats: u16, ports: &[u16], t: &Timings) -> String {
    let retries = t.balancer_retries;
    let Check {
        inter_ms,
        fall,
        rise,
        timeout_ms,
    } = t.check;
    let timeout_check = timeout_ms
        .map(|ms| format!("  timeout check {ms}ms\n"))
        .unwrap_or_default();
    let mut s = format!(
        "global
  maxconn 4096
defaults
  mode http
  timeout connect 1s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 10s
{timeout_check}  # A connection that could not be made never reached a replica: trying another one is safe
  # for every request, a POST that starts a run included. Nothing else is retried: a replica
  # that accepted a request may have started a run, so it must answer it itself (the lame
  # duck and the drain see to that).
  retries {retries}
  retry-on conn-failure
  option redispatch
  default-server inter {inter_ms}ms fall {fall} rise {rise}
frontend mcp
  bind 127.0.0.1:{front}
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  http-response set-header X-Replica %s
"
    );
    for (i, p) in ports.iter().enumerate() {
        s.push_str(&format!("  server r{i} 127.0.0.1:{p} check\n"));
    }
    s.push_str(&format!(
        "listen stats
  bind 127.0.0.1:{stats}
  stats enable
  stats uri /stats
"
    ));
    s
}

impl Stack {
    pub async fn start(n: usize, t: Timings) -> Stack {
        Stack::start_with_host(n, t, |_| {}).await
    }

    pub async fn start_with_host(
        n: usize,
        t: Timings,
        h: impl FnOnce(&mut DevHostConfig),
    ) -> Stack {
        Stack::launch(n, t, flavoured_yaml(t), h).await
    }

    /// N replicas that all load `sidecar_yaml` (`--listen` and `--upstream` still set per
    /// replica), e.g. the configuration the Helm chart renders.
    pub async fn start_with_config(n: usize, t: Timings, sidecar_yaml: String) -> Stack {
        Stack::launch(n, t, sidecar_yaml, |_| {}).await
    }

    async fn launch(
        n: usize,
        t: Timings,
        sidecar_yaml: String,
        h: impl FnOnce(&mut DevHostConfig),
    ) -> Stack {
        let haproxy = haproxy_bin();
        let dir = crate::support::scratch_dir("replicas");
        // OPENWOP_TEST_FLAVOR=legacy: the legacy job API behind config/legacy-host.example.yaml,
        // as the other suites do (support::legacy).
        let mut host_cfg = DevHostConfig {
            sse_keepalive: Duration::from_millis(500),
            flavor: if crate::support::legacy() {
                openwop_devhost::Flavor::Legacy
            } else {
                openwop_devhost::Flavor::V2
            },
            ..DevHostConfig::default()
        };
        h(&mut host_cfg);
        let host = openwop_devhost::spawn(host_cfg, "127.0.0.1:0".parse().unwrap())
            .await
            .expect("devhost starts");
        let config = dir.join("sidecar.yaml");
        std::fs::write(&config, sidecar_yaml).unwrap();
        let mut replicas = Vec::new();
        for i in 0..n {
            replicas.push(
                Replica::start(
                    free_port(),
                    config.clone(),
                    host.base_url(),
                    SHARED_KEY.into(),
                    dir.join(format!("r{i}.log")),
                )
                .await,
            );
        }
        let front = free_port();
        let stats = free_port();
        let ports: Vec<u16> = replicas.iter().map(|r| r.port).collect();
        let cfg_path = dir.join("haproxy.cfg");
        std::fs::write(&cfg_path, haproxy_cfg(front, stats, &ports, &t)).unwrap();
        let hlog = std::fs::File::create(dir.join("haproxy.log")).unwrap();
        let haproxy = tokio::process::Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&cfg_path)
            .stdout(Stdio::null())
            .stderr(Stdio::from(hlog))
            .kill_on_drop(true)
            .spawn()
            .expect("haproxy starts");
        let stack = Stack {
            env: Env {
                host,
                server: None,
                url: format!("http://127.0.0.1:{front}"),
                http: reqwest::Client::builder().no_proxy().build().unwrap(),
            },
            replicas,
            dir,
            haproxy,
            stats: format!("http://127.0.0.1:{stats}/stats;csv"),
        };
        for i in 0..n {
            stack.wait_status(i, "UP", Duration::from_secs(10)).await;
        }
        stack
    }

    /// HAProxy's view of replica `i` (`UP`, `DOWN`, …), from its stats CSV.
    pub async fn status(&self, i: usize) -> String {
        let Ok(r) = self.env.http.get(&self.stats).send().await else {
            return "no-stats".into();
        };
        let csv = r.text().await.unwrap_or_default();
        let mut lines = csv.lines();
        let head: Vec<&str> = lines
            .next()
            .unwrap_or("")
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let col = |name: &str| head.iter().position(|h| *h == name);
        let (Some(sv), Some(st)) = (col("svname"), col("status")) else {
            return "no-stats".into();
        };
        let name = format!("r{i}");
        lines
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|f| f.get(sv) == Some(&name.as_str()))
            .and_then(|f| f.get(st).map(|s| s.to_string()))
            .unwrap_or_else(|| "missing".into())
    }

    /// Waits until HAProxy reports replica `i` as `want` (prefix: `DOWN` matches `DOWN 1/2`).
    pub async fn wait_status(&self, i: usize, want: &str, within: Duration) -> Duration {
        let t0 = Instant::now();
        loop {
            let s = self.status(i).await;
            if s.starts_with(want) {
                return t0.elapsed();
            }
            assert!(
                t0.elapsed() < within,
                "HAProxy did not see r{i} {want} within {within:?} (last: {s}); logs in {}",
                self.dir.display()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub async fn stop(mut self) {
        let _ = self.haproxy.start_kill();
        let _ = self.haproxy.wait().await;
        for r in &mut self.replicas {
            if let Some(c) = r.child.as_mut() {
                let _ = c.start_kill();
                let _ = c.wait().await;
            }
        }
        self.env.host.shutdown().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The replica HAProxy says answered.
pub fn replica_of(headers: &reqwest::header::HeaderMap) -> String {
    headers
        .get(REPLICA_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("?")
        .to_string()
}
