//! MCP logging (docs/semantics.md §22): what a client is sent as `notifications/message` while
//! its call runs, at the level it chose: a burst of at most [`PER_SECOND`], then at most that
//! many a second, per call.
//!
//! The level: a 2025-era client's `logging/setLevel` sets it for its connection (stdio: the
//! process; HTTP: the session, or with stateless serving the one request, so such a client
//! gets the default, [`DEFAULT_LEVEL`]); a 2026-07-28 client names it in each request's `_meta`
//! (`io.modelcontextprotocol/logLevel`), and a request without it is sent none.
//!
//! What is sent, by level: debug, each node's start and end, and a caught failure's text;
//! info, a node's failure caught by its `onError` (or a failed map item or branch kept or
//! skipped), by its kind, and a call that needed more than one attempt; error, the call's
//! failure; and every graph `log:` at its own level. Only what the call's result or error
//! already tells the client (node ids, types, kinds, attempts, times, the call's failure text
//! with the configuration's secrets hidden, as in error results) and, at debug only, a caught
//! failure's text; never an argument's or an output's value, except what a graph's own `log:`
//! chooses to say.

// rmcp marks MCP logging deprecated (SEP-2577, for a protocol era to come); today's clients,
// and the official conformance suite, use it.
#![expect(deprecated, reason = "MCP logging as clients use it today")]

use mcpgraph_compiler::ir::LogLevel;
use rmcp::model::LoggingLevel;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// The level of a connection that never set one: the graph's own `log:` lines (info) reach
/// the client without asking, node starts and ends (debug) only when asked for.
pub(crate) const DEFAULT_LEVEL: LogLevel = LogLevel::Info;

/// The most messages a call sends in one second (and in a burst); the rest are counted, and
/// the count is sent, as a warning, before the result.
pub(crate) const PER_SECOND: u32 = 100;

/// The level a connection set with `logging/setLevel`. Clones share it.
#[derive(Clone)]
pub(crate) struct ConnectionLevel(Arc<AtomicU8>);

impl Default for ConnectionLevel {
    fn default() -> ConnectionLevel {
        ConnectionLevel(Arc::new(AtomicU8::new(DEFAULT_LEVEL as u8)))
    }
}

impl ConnectionLevel {
    pub(crate) fn set(&self, level: LogLevel) {
        self.0.store(level as u8, Ordering::Relaxed);
    }

    /// `LogLevel::ALL` lists the levels in declaration order, so a level's discriminant is its
    /// index there.
    pub(crate) fn get(&self) -> LogLevel {
        let index = usize::from(self.0.load(Ordering::Relaxed));
        LogLevel::ALL.get(index).copied().unwrap_or(DEFAULT_LEVEL)
    }
}

pub(crate) fn from_mcp(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}

pub(crate) fn to_mcp(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

/// A call's allowance of messages: [`PER_SECOND`] tokens, refilled continuously.
pub(crate) struct Allowance {
    tokens: f64,
    last: Instant,
    /// Messages refused so far.
    pub(crate) dropped: u64,
}

impl Default for Allowance {
    fn default() -> Allowance {
        Allowance {
            tokens: f64::from(PER_SECOND),
            last: Instant::now(),
            dropped: 0,
        }
    }
}

impl Allowance {
    /// Whether one more message may be sent now (counted as dropped if not).
    pub(crate) fn take(&mut self) -> bool {
        self.take_at(Instant::now())
    }

    fn take_at(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last);
        self.last = now;
        let cap = f64::from(PER_SECOND);
        self.tokens = (self.tokens + elapsed.as_secs_f64() * cap).min(cap);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}

/// A duration for people: `3.2 ms`.
pub(crate) fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_level_round_trips_every_level() {
        let level = ConnectionLevel::default();
        assert_eq!(level.get(), DEFAULT_LEVEL);
        for each in LogLevel::ALL {
            level.set(each);
            assert_eq!(level.get(), each);
            assert_eq!(from_mcp(to_mcp(each)), each);
        }
        let shared = level.clone();
        shared.set(LogLevel::Debug);
        assert_eq!(level.get(), LogLevel::Debug, "clones share the level");
    }

    #[test]
    fn the_allowance_refuses_past_the_rate_and_refills() {
        let mut allowance = Allowance::default();
        let start = allowance.last;
        let sent = (0..PER_SECOND * 2)
            .filter(|_| allowance.take_at(start))
            .count();
        assert_eq!(sent, PER_SECOND as usize, "a burst of at most the rate");
        assert_eq!(allowance.dropped, u64::from(PER_SECOND));
        // Half a second later, half the rate again.
        let later = start + Duration::from_millis(500);
        let refilled = (0..PER_SECOND).filter(|_| allowance.take_at(later)).count();
        assert_eq!(refilled, PER_SECOND as usize / 2);
    }
}
