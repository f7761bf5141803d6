//! The table, the notes under it, and the machine's conditions.

use std::path::Path;
use std::time::Duration;

use crate::procs::Mem;
use crate::Plan;

pub struct Row {
    pub section: &'static str,
    pub measure: String,
    pub sidecar: String,
    pub direct: String,
    pub compare: String,
    pub target: String,
    /// `Some(true)` PASS, `Some(false)` MISS, `None` no target.
    pub verdict: Option<bool>,
}

pub struct Report {
    conditions: Vec<(String, String)>,
    rows: Vec<Row>,
    notes: Vec<String>,
    raw: Vec<String>,
    sections: Vec<(String, Option<String>)>,
}

pub fn ms(v: f64) -> String {
    if v.is_nan() {
        return "n/a".into();
    }
    format!("{v:.3} ms")
}

/// A difference in milliseconds with its sign.
pub fn signed_ms(v: f64) -> String {
    if v.is_nan() {
        return "n/a".into();
    }
    if v < 0.0 {
        format!("−{:.3} ms", -v)
    } else {
        format!("+{v:.3} ms")
    }
}

pub fn mb(kb: u64) -> String {
    format!("{:.1} MB", kb as f64 / 1024.0)
}

pub fn mem_str(m: Mem) -> String {
    format!(
        "VmRSS {} (VmHWM {}), {} threads, {} fds",
        mb(m.rss_kb),
        mb(m.hwm_kb),
        m.threads,
        m.fds
    )
}

fn read(p: &str) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn cpu_model() -> String {
    read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn mem_total() -> String {
    read("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map(|kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0))
        .unwrap_or_else(|| "unknown".into())
}

fn loadavg() -> String {
    read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Other compilers and linkers running now (the machine is shared with parallel builds).
fn busy() -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    if let Ok(d) = std::fs::read_dir("/proc") {
        for e in d.flatten() {
            let name = e.file_name();
            if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let comm = read(&format!("/proc/{}/comm", name.to_string_lossy()));
            let comm = comm.trim();
            if matches!(
                comm,
                "rustc" | "cargo" | "cc" | "cc1" | "ld" | "rust-lld" | "node"
            ) {
                *counts.entry(comm.to_string()).or_default() += 1;
            }
        }
    }
    if counts.is_empty() {
        "none".into()
    } else {
        counts
            .iter()
            .map(|(k, v)| format!("{v}× {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn command(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

impl Report {
    pub fn new(plan: &Plan, nofile: u64, bin: &Path, logs: &Path, temporary: bool) -> Report {
        let nproc = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0);
        let conditions = vec![
            ("mode".into(), plan.name.to_string()),
            (
                "machine".into(),
                format!("{nproc} CPUs ({}), {} RAM", cpu_model(), mem_total()),
            ),
            (
                "kernel".into(),
                read("/proc/sys/kernel/osrelease").trim().to_string(),
            ),
            ("rustc".into(), command("rustc", &["--version"])),
            (
                "sidecar".into(),
                format!(
                    "{} ({})",
                    bin.display(),
                    std::env::var("BENCH_COMMIT")
                        .unwrap_or_else(|_| command("git", &["rev-parse", "--short", "HEAD"]))
                ),
            ),
            ("open files limit".into(), nofile.to_string()),
            (
                "nice (bench and sidecar)".into(),
                read("/proc/self/stat")
                    .rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().nth(16).map(str::to_string))
                    .unwrap_or_else(|| "unknown".into()),
            ),
            ("load average at start".into(), loadavg()),
            ("other builds at start".into(), busy()),
            (
                "logs".into(),
                if temporary {
                    format!("{} (removed when the run passes)", logs.display())
                } else {
                    logs.display().to_string()
                },
            ),
        ];
        Report {
            conditions,
            rows: Vec::new(),
            notes: Vec::new(),
            raw: Vec::new(),
            sections: Vec::new(),
        }
    }

    pub fn row(&mut self, r: Row) {
        let v = match r.verdict {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "",
        };
        eprintln!(
            "  [{}] {} | {} | {} | {} | {} {}",
            r.section, r.measure, r.sidecar, r.direct, r.compare, r.target, v
        );
        self.rows.push(r);
    }

    pub fn condition(&mut self, k: &str, v: String) {
        self.conditions.push((k.into(), v));
    }

    pub fn note(&mut self, n: String) {
        eprintln!("  note: {n}");
        self.notes.push(n);
    }

    pub fn raw(&mut self, n: String) {
        self.raw.push(n);
    }

    pub fn section(&mut self, name: &str, r: anyhow::Result<()>) {
        let err = r.err().map(|e| format!("{e:#}"));
        if let Some(e) = &err {
            eprintln!("section {name} FAILED: {e}");
        }
        self.sections.push((name.to_string(), err));
    }

    pub fn finish(&mut self, took: Duration) {
        self.conditions
            .push(("load average at end".into(), loadavg()));
        self.conditions.push(("other builds at end".into(), busy()));
        self.conditions
            .push(("wall time".into(), format!("{:.0} s", took.as_secs_f64())));
    }

    pub fn counts(&self) -> (usize, usize) {
        let failed = self.sections.iter().filter(|(_, e)| e.is_some()).count();
        (self.sections.len() - failed, failed)
    }

    fn verdict(v: Option<bool>) -> &'static str {
        match v {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "",
        }
    }

    pub fn render_text(&self) -> String {
        let mut out = String::new();
        out.push_str("\n== openwop-mcp-sidecar benchmarks\n");
        for (k, v) in &self.conditions {
            out.push_str(&format!("{k:>24}: {v}\n"));
        }
        let head = [
            "#",
            "measure",
            "through sidecar",
            "direct",
            "vs direct / detail",
            "target",
            "",
        ];
        let cells: Vec<[String; 7]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.section.to_string(),
                    r.measure.clone(),
                    r.sidecar.clone(),
                    r.direct.clone(),
                    r.compare.clone(),
                    r.target.clone(),
                    Self::verdict(r.verdict).to_string(),
                ]
            })
            .collect();
        let mut w = head.map(|h| h.chars().count());
        for c in &cells {
            for (i, s) in c.iter().enumerate() {
                w[i] = w[i].max(s.chars().count());
            }
        }
        let line = |c: &[String]| {
            let mut s = String::new();
            for (i, x) in c.iter().enumerate() {
                let pad = w[i] - x.chars().count();
                s.push_str(x);
                s.push_str(&" ".repeat(pad));
                if i + 1 < c.len() {
                    s.push_str(" | ");
                }
            }
            s.trim_end().to_string() + "\n"
        };
        out.push('\n');
        out.push_str(&line(&head.map(String::from)));
        out.push_str(&line(&w.map(|n| "-".repeat(n))));
        for c in &cells {
            out.push_str(&line(c));
        }
        if !self.notes.is_empty() {
            out.push_str("\nnotes:\n");
            for n in &self.notes {
                out.push_str(&format!("  - {n}\n"));
            }
        }
        out.push_str("\nsections:\n");
        for (name, e) in &self.sections {
            match e {
                None => out.push_str(&format!("  ok     {name}\n")),
                Some(e) => out.push_str(&format!("  FAILED {name}: {e}\n")),
            }
        }
        out
    }

    pub fn render_markdown(&self) -> String {
        let mut out = String::new();
        out.push_str("| condition | value |\n| --- | --- |\n");
        for (k, v) in &self.conditions {
            out.push_str(&format!("| {k} | {v} |\n"));
        }
        out.push_str("\n| # | measure | through sidecar | direct | vs direct / detail | target | |\n| --- | --- | --- | --- | --- | --- | --- |\n");
        for r in &self.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                r.section,
                r.measure,
                r.sidecar,
                r.direct,
                r.compare,
                r.target,
                Self::verdict(r.verdict)
            ));
        }
        out.push_str("\nNotes:\n\n");
        for n in &self.notes {
            out.push_str(&format!("- {n}\n"));
        }
        out.push_str("\nPer-repeat values:\n\n");
        for n in &self.raw {
            out.push_str(&format!("- {n}\n"));
        }
        out.push_str("\nSections:\n\n");
        for (name, e) in &self.sections {
            match e {
                None => out.push_str(&format!("- ok: {name}\n")),
                Some(e) => out.push_str(&format!("- FAILED: {name}: {e}\n")),
            }
        }
        out
    }
}
