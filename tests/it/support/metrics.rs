//! Reading the sidecar's Prometheus `/metrics` as an operator's scraper does.

use super::Env;

impl Env {
    /// The `/metrics` exposition text.
    pub async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The value of the first `/metrics` sample line starting with `sample` (0 when absent).
    pub async fn metric(&self, sample: &str) -> f64 {
        sample_value(&self.metrics().await, sample)
    }
}

/// The value of the first sample line of `text` starting with `sample` (0 when absent).
pub fn sample_value(text: &str, sample: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(sample))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}
