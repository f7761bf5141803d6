//! The OpenWOP v2 vocabulary every layer shares: run statuses (OpenWOP v2 runs.md, getRun) and
//! run event kinds (OpenWOP v2 events.md). It sits at the bottom so that the configuration (which
//! maps host status names onto these) and the host client both depend on it, and neither on
//! the other (docs/architecture.md, allowed directions).

/// RunSnapshot.status (§1.4), canonical. Unknown future values are kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    Pending,
    Running,
    Paused,
    WaitingApproval,
    WaitingInput,
    WaitingExternal,
    Cancelling,
    Completed,
    Failed,
    Cancelled,
    Unknown(String),
}

/// The canonical statuses (OpenWOP v2 runs.md, getRun), which are also the v2 host values.
pub const CANONICAL: [&str; 10] = [
    "pending",
    "running",
    "paused",
    "waiting-approval",
    "waiting-input",
    "waiting-external",
    "cancelling",
    "completed",
    "failed",
    "cancelled",
];

impl RunStatus {
    pub fn parse(s: &str) -> RunStatus {
        match s {
            "pending" => RunStatus::Pending,
            "running" => RunStatus::Running,
            "paused" => RunStatus::Paused,
            "waiting-approval" => RunStatus::WaitingApproval,
            "waiting-input" => RunStatus::WaitingInput,
            "waiting-external" => RunStatus::WaitingExternal,
            "cancelling" => RunStatus::Cancelling,
            "completed" => RunStatus::Completed,
            "failed" => RunStatus::Failed,
            "cancelled" => RunStatus::Cancelled,
            other => RunStatus::Unknown(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::WaitingApproval => "waiting-approval",
            RunStatus::WaitingInput => "waiting-input",
            RunStatus::WaitingExternal => "waiting-external",
            RunStatus::Cancelling => "cancelling",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Unknown(s) => s,
        }
    }

    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    /// Suspended on an interrupt a client can answer (§3.7: `input_required`).
    pub fn awaits_client(&self) -> bool {
        matches!(self, RunStatus::WaitingApproval | RunStatus::WaitingInput)
    }

    /// Where a blocking call stops waiting (§3.5 step 5): terminal or any `waiting-*`, and
    /// unknown future values, which the SDKs treat as not active.
    pub fn settles_blocking_wait(&self) -> bool {
        self.is_terminal()
            || matches!(
                self,
                RunStatus::WaitingApproval
                    | RunStatus::WaitingInput
                    | RunStatus::WaitingExternal
                    | RunStatus::Unknown(_)
            )
    }
}

/// Run event kinds the sidecar reads (`RunEventDoc.type`, OpenWOP v2 events.md). Kinds are
/// open-ended strings on the wire, so these are names to match against, not a closed enum.
pub mod event {
    pub const RUN_STARTED: &str = "run.started";
    pub const RUN_COMPLETED: &str = "run.completed";
    pub const RUN_FAILED: &str = "run.failed";
    pub const RUN_CANCELLED: &str = "run.cancelled";
    pub const NODE_SUSPENDED: &str = "node.suspended";
    pub const NODE_RESUMED: &str = "node.resumed";
    pub const NODE_CANCELLED: &str = "node.cancelled";
    pub const NODE_COMPLETED: &str = "node.completed";
    pub const NODE_FAILED: &str = "node.failed";
    pub const INTERRUPT_REQUESTED: &str = "interrupt.requested";
    pub const INTERRUPT_RESOLVED: &str = "interrupt.resolved";

    /// Whether a kind ends the run (`run.completed`, `run.failed`, `run.cancelled`).
    pub fn is_terminal(kind: &str) -> bool {
        matches!(kind, RUN_COMPLETED | RUN_FAILED | RUN_CANCELLED)
    }
}
