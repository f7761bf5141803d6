//! The MCP methods the mount knows, in one place: dispatch (`super::dispatch`), the params
//! check (`params.rs`), the `Mcp-Name` header rule (`envelope.rs`), the metric label and the
//! `server/discover` capabilities all match on [`Method`], exhaustively, so adding a method
//! is one arm in [`methods!`] plus its handler, and the compiler points at every place that
//! must decide something about it.

use crate::telemetry::MethodLabel;

/// Declares [`Method`] with its wire names; [`Method::ALL`] lists every variant, so nothing
/// derived from it can miss one.
macro_rules! methods {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// An MCP method name the mount recognises (served, or refused with a rule of its own).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Method {
            $($(#[$doc])* $variant,)*
        }

        impl Method {
            /// Every method, in declaration order.
            pub const ALL: &'static [Method] = &[$(Method::$variant),*];

            /// The method's name on the wire.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Method::$variant => $name,)*
                }
            }

            /// The method a name on the wire means; `None` for a name the mount does not know
            /// (answered `-32601`).
            pub fn from_name(name: &str) -> Option<Method> {
                match name {
                    $($name => Some(Method::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

methods! {
    /// MCP 2026-07-28 server/discover.
    ServerDiscover = "server/discover",
    /// MCP 2026-07-28 Tools §Listing Tools.
    ToolsList = "tools/list",
    /// MCP 2026-07-28 Tools §Calling Tools (with ext-tasks and MRTR).
    ToolsCall = "tools/call",
    /// ext-tasks §tasks/get.
    TasksGet = "tasks/get",
    /// ext-tasks §tasks/update.
    TasksUpdate = "tasks/update",
    /// ext-tasks §tasks/cancel.
    TasksCancel = "tasks/cancel",
    /// MCP 2026-07-28 Subscriptions (ext-tasks §notifications/tasks).
    SubscriptionsListen = "subscriptions/listen",
    /// Not served (`-32601`); known for its `Mcp-Name` rule (MCP 2026-07-28 Transports
    /// §Request headers).
    PromptsGet = "prompts/get",
    /// Not served (`-32601`); known for its `Mcp-Name` rule.
    ResourcesRead = "resources/read",
    /// Removed by ext-tasks (§Errors: `-32601`); a `taskId` it carries still has to agree with
    /// `Mcp-Name`.
    TasksResult = "tasks/result",
    /// Removed by ext-tasks (§Errors: `-32601`).
    TasksList = "tasks/list",
}

/// The body member `Mcp-Name` mirrors (MCP 2026-07-28 Transports §Request headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameRule {
    /// The `params` member the header carries.
    pub member: &'static str,
    /// The header must be sent whenever the body carries the member as a string; otherwise a
    /// header that is sent must still agree with it.
    pub required: bool,
}

/// A server capability `server/discover` advertises for the methods that serve it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// `capabilities.tools`.
    Tools,
    /// `capabilities.extensions["io.modelcontextprotocol/tasks"]` (ext-tasks), while
    /// `tasks.enabled`.
    Tasks,
}

impl Method {
    /// Whether the mount answers it with a handler (the others are `-32601`).
    pub const fn served(self) -> bool {
        match self {
            Method::ServerDiscover
            | Method::ToolsList
            | Method::ToolsCall
            | Method::TasksGet
            | Method::TasksUpdate
            | Method::TasksCancel
            | Method::SubscriptionsListen => true,
            Method::PromptsGet
            | Method::ResourcesRead
            | Method::TasksResult
            | Method::TasksList => false,
        }
    }

    /// A method of the Tasks extension: its params are checked only once the mount serves it
    /// and the request declared the extension (-32601, then -32021, then -32602).
    pub const fn of_tasks_extension(self) -> bool {
        match self {
            Method::TasksGet
            | Method::TasksUpdate
            | Method::TasksCancel
            | Method::TasksResult
            | Method::TasksList => true,
            Method::ServerDiscover
            | Method::ToolsList
            | Method::ToolsCall
            | Method::SubscriptionsListen
            | Method::PromptsGet
            | Method::ResourcesRead => false,
        }
    }

    /// What `Mcp-Name` mirrors for this method, if anything.
    pub const fn name_rule(self) -> Option<NameRule> {
        const fn rule(member: &'static str, required: bool) -> Option<NameRule> {
            Some(NameRule { member, required })
        }
        match self {
            Method::ToolsCall | Method::PromptsGet => rule("name", true),
            Method::ResourcesRead => rule("uri", true),
            Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => rule("taskId", true),
            Method::TasksResult | Method::TasksList => rule("taskId", false),
            Method::ServerDiscover | Method::ToolsList | Method::SubscriptionsListen => None,
        }
    }

    /// The capability `server/discover` advertises for it.
    pub const fn capability(self) -> Option<Capability> {
        match self {
            Method::ToolsList | Method::ToolsCall => Some(Capability::Tools),
            Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => Some(Capability::Tasks),
            Method::ServerDiscover
            | Method::SubscriptionsListen
            | Method::PromptsGet
            | Method::ResourcesRead
            | Method::TasksResult
            | Method::TasksList => None,
        }
    }

    /// The request counter's method label: its own for a served method, the shared
    /// [`MethodLabel::OTHER`] for one answered `-32601`.
    pub const fn metric(self) -> MethodLabel {
        if self.served() {
            MethodLabel::new(MethodLabel::FIRST_FREE + self as usize, self.name())
        } else {
            MethodLabel::OTHER
        }
    }
}

/// The `Mcp-Name` rule of a method name: the method's own, or for a name the mount does not
/// know, the rule of the `tasks/` family (a `taskId` it carries must agree with a header that
/// is sent), so an unknown task method is refused for a mismatch before it is not found.
pub fn name_rule_of(method: Option<Method>, name: &str) -> Option<NameRule> {
    match method {
        Some(m) => m.name_rule(),
        None if name.starts_with("tasks/") => Some(NameRule {
            member: "taskId",
            required: false,
        }),
        None => None,
    }
}

/// The metric label of a request whose method name was read: unknown names all count as
/// [`MethodLabel::OTHER`] (a label per name would let any caller grow the registry).
pub fn metric_of(method: Option<Method>) -> MethodLabel {
    method.map_or(MethodLabel::OTHER, Method::metric)
}

// Every served method has its own cached counter slot.
const _: () = assert!(MethodLabel::FIRST_FREE + Method::ALL.len() <= MethodLabel::SLOTS);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_found_by_its_own_name_and_labels_are_distinct() {
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.name()), Some(*m));
        }
        assert_eq!(Method::from_name("initialize"), None);
        let mut slots: Vec<usize> = Method::ALL
            .iter()
            .filter(|m| m.served())
            .map(|m| m.metric().slot())
            .collect();
        slots.extend([MethodLabel::UNREAD.slot(), MethodLabel::OTHER.slot()]);
        let n = slots.len();
        slots.sort();
        slots.dedup();
        assert_eq!(slots.len(), n);
    }
}
