//! What the host pools (h1pool.rs, h2pool.rs) share: the typed error of a request that got no
//! answer head. Its own room, so that neither pool imports the other for it.

/// Why a request did not get an answer head.
#[derive(Debug)]
pub enum PoolError {
    /// No connection could be made (refused, TLS failure, no `h2` in ALPN, connect timeout):
    /// nothing reached the host.
    Connect(String),
    /// The request was handed back unsent twice: nothing reached the host.
    NotSent(String),
    /// The exchange failed after the request may have reached the host.
    Broken(String),
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolError::Connect(why) => write!(f, "cannot connect to the host: {why}"),
            PoolError::NotSent(why) => write!(f, "the request could not be sent: {why}"),
            PoolError::Broken(why) => write!(f, "the exchange broke off: {why}"),
        }
    }
}

impl std::error::Error for PoolError {}
