//! The upstream operations the sidecar performs, named once: the key of every route, answer
//! and template scope. A leaf.

/// Every upstream operation the sidecar performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    Discovery,
    GetWorkflow,
    ListTools,
    CreateRun,
    GetRun,
    ListRuns,
    CancelRun,
    ResolveInterrupt,
    PollEvents,
    StreamEvents,
}

impl Operation {
    pub const ALL: [Operation; 10] = [
        Operation::Discovery,
        Operation::GetWorkflow,
        Operation::ListTools,
        Operation::CreateRun,
        Operation::GetRun,
        Operation::ListRuns,
        Operation::CancelRun,
        Operation::ResolveInterrupt,
        Operation::PollEvents,
        Operation::StreamEvents,
    ];

    /// The key used in the YAML file and in metrics labels.
    pub fn key(self) -> &'static str {
        match self {
            Operation::Discovery => "discovery",
            Operation::GetWorkflow => "getWorkflow",
            Operation::ListTools => "listTools",
            Operation::CreateRun => "createRun",
            Operation::GetRun => "getRun",
            Operation::ListRuns => "listRuns",
            Operation::CancelRun => "cancelRun",
            Operation::ResolveInterrupt => "resolveInterrupt",
            Operation::PollEvents => "pollEvents",
            Operation::StreamEvents => "streamEvents",
        }
    }

    pub fn from_key(key: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|o| o.key() == key)
    }

    /// OpenWOP v2 defaults: (method, path template, may retry).
    pub fn v2_default(self) -> (&'static str, &'static str, bool) {
        match self {
            Operation::Discovery => ("GET", "/.well-known/openwop", true),
            Operation::GetWorkflow => ("GET", "/workflows/{workflowId}", true),
            Operation::ListTools => ("GET", "/tools", true),
            // Retried only because every createRun carries an Idempotency-Key (§1.9).
            Operation::CreateRun => ("POST", "/runs", true),
            Operation::GetRun => ("GET", "/runs/{runId}", true),
            Operation::ListRuns => ("GET", "/runs", true),
            // Cancel is idempotent in effect: a repeat on a terminal run is 409 run_terminal.
            Operation::CancelRun => ("POST", "/runs/{runId}/cancel", true),
            // Not retried by default: a lost answer must not resolve a second vote.
            Operation::ResolveInterrupt => ("POST", "/runs/{runId}/interrupts/{nodeId}", false),
            Operation::PollEvents => ("GET", "/runs/{runId}/events/poll", true),
            Operation::StreamEvents => ("GET", "/runs/{runId}/events", true),
        }
    }

    /// Placeholders the path template must contain.
    pub fn required_params(self) -> &'static [&'static str] {
        match self {
            Operation::GetWorkflow => &["workflowId"],
            Operation::GetRun
            | Operation::CancelRun
            | Operation::PollEvents
            | Operation::StreamEvents => &["runId"],
            Operation::ResolveInterrupt => &["runId", "nodeId"],
            _ => &[],
        }
    }
}
