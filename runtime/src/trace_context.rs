//! W3C Trace Context (docs/observability.md): a call's `traceparent` and `tracestate`, taken
//! from the request's `params._meta` (any transport) or its HTTP headers, and forwarded
//! unchanged in the `_meta` of every downstream MCP request the call makes, so a trace started
//! by a client stays one trace across graph servers calling graph servers. mcpgraph records no
//! spans of its own yet: as the W3C recommendation asks of an intermediary that does not trace,
//! it passes the context on as it came. Only a well-formed `traceparent` is forwarded (a
//! malformed one is dropped, with its `tracestate`).

/// A call's trace context, valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub traceparent: String,
    pub tracestate: Option<String>,
}

/// The longest `tracestate` forwarded (W3C: at most 32 members; 512 characters is what
/// implementations must at least propagate).
const MAX_TRACESTATE: usize = 512;

impl TraceContext {
    /// The context of `traceparent` (and `tracestate`), if the former is well formed: version
    /// `00` (or a later version's first four fields), a trace id and a parent id of lower-case
    /// hex and not all zeros, two hex digits of flags.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let traceparent = traceparent.trim();
        let mut fields = traceparent.split('-');
        let (version, trace, parent, flags) = (
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
        );
        let hex = |s: &str, len: usize| {
            s.len() == len
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let zeros = |s: &str| s.bytes().all(|b| b == b'0');
        let valid = hex(version, 2)
            && version != "ff"
            && (version != "00" || fields.next().is_none())
            && hex(trace, 32)
            && !zeros(trace)
            && hex(parent, 16)
            && !zeros(parent)
            && hex(flags, 2);
        if !valid {
            return None;
        }
        let tracestate = tracestate
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE && s.is_ascii())
            .map(str::to_string);
        Some(TraceContext {
            traceparent: traceparent.to_string(),
            tracestate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn well_formed_contexts_are_kept_and_others_dropped() {
        let context = TraceContext::parse(GOOD, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(context.traceparent, GOOD);
        assert_eq!(context.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
        assert_eq!(TraceContext::parse(GOOD, None).unwrap().tracestate, None);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad, Some("a=b")), None, "{bad:?}");
        }
        // A later version may add fields after the four it shares with 00.
        assert!(
            TraceContext::parse(
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later",
                None
            )
            .is_some()
        );
        let long = "a=".to_string() + &"b".repeat(600);
        assert_eq!(
            TraceContext::parse(GOOD, Some(&long)).unwrap().tracestate,
            None
        );
    }
}
