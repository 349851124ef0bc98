//! Typing of the language extensions' keys (docs/extensions-checks.md): `timeoutMs`, `retry`,
//! `onError`, and the `map`, `parallel` and `ask` node types.
//!
//! Everything here needs only the node itself, so it is checked while the AST is built: numbers
//! and their ranges, kind lists (including which kinds a node's type can fail with), the shape of
//! branches and of an ask's schema. What needs the rest of the tool or the graph (node ids, tool
//! names, `$item` scoping, cycles of `self` calls) is checked in `check`.

use super::{
    BranchDecl, LogDecl, NodeDecl, NodeType, OnErrorDecl, SELF_SERVER, Sp, args, get, key_span,
    mapping, required_str,
};
use crate::diagnostics::{Diagnostic, Span, did_you_mean};
use crate::ir::{FailureKind, LogLevel, MAX_CONCURRENCY, OnItemError, Retry};
use crate::yaml::{Yaml, YamlKind};

/// Keys the extensions add. An unknown key that is a near miss of one of these, where it is
/// valid, is an error (E0613) rather than an ignored key (W0101): see [`unknown_key`].
const EXTENSION_KEYS: &[&str] = &[
    "timeoutMs",
    "retry",
    "onError",
    "items",
    "concurrency",
    "onItemError",
    "branches",
    "message",
    "schema",
    "maxAttempts",
    "delayMs",
    "backoffRate",
    "maxDelayMs",
    "kinds",
    "log",
    "level",
];

const RETRY_KEYS: &[&str] = &[
    "maxAttempts",
    "delayMs",
    "backoffRate",
    "maxDelayMs",
    "kinds",
];
const ON_ERROR_KEYS: &[&str] = &["next", "kinds"];
const BRANCH_KEYS: &[&str] = &["server", "tool", "args", "timeoutMs", "retry"];
const LOG_KEYS: &[&str] = &["level", "message"];

/// The diagnostic for a key not in `known`: E0613 when it is a near miss of an extension key in
/// `known` (equal ignoring ASCII case, or the did-you-mean suggestion among `known` is an
/// extension key), else W0101.
pub(super) fn unknown_key(span: Span, key: &str, owner: &str, known: &[&str]) -> Diagnostic {
    let suggestion = did_you_mean(key, known.iter().copied());
    let near = known
        .iter()
        .copied()
        .find(|k| k.eq_ignore_ascii_case(key))
        .map(str::to_string)
        .or_else(|| suggestion.clone())
        .filter(|k| EXTENSION_KEYS.contains(&k.as_str()));
    match near {
        Some(meant) => Diagnostic::misspelt_extension_key(span, key, owner, &meant),
        None => Diagnostic::unknown_key(span, key, owner, suggestion),
    }
}

/// The entries of a mapping of the extensions (`retry`, `onError`, a branch): like
/// [`mapping`], with [`unknown_key`]'s near-miss rule for the keys it does not know.
fn ext_mapping<'a>(
    node: &'a Yaml,
    what: &str,
    known: &[&str],
    diags: &mut Vec<Diagnostic>,
) -> Option<&'a [(Yaml, Yaml)]> {
    // Types the mapping without judging its keys, then judges them here.
    let entries = mapping(node, what, &[], diags)?;
    for (key, _) in entries {
        let text = key.key_text();
        if !known.contains(&text.as_str()) {
            diags.push(unknown_key(key.span, &text, what, known));
        }
    }
    Some(entries)
}

/// E0603 for `onError`, `retry` or `timeoutMs` on a node type that does not take it; returns
/// whether it was one (so that it is not also reported as unknown).
pub(super) fn misplaced(
    key: &Yaml,
    kind: NodeType,
    owner: &str,
    diags: &mut Vec<Diagnostic>,
) -> bool {
    use NodeType::*;
    let text = key.key_text();
    let help = match (text.as_str(), kind) {
        ("onError", Transform | Mcp | Map | Parallel | Ask) => return false,
        ("retry", Mcp | Map) => return false,
        ("timeoutMs", Mcp | Map | Ask) => return false,
        ("onError", Switch) => {
            "a switch that matches no condition fails with kind `route`, a graph bug that is never caught: add a default condition"
        }
        ("onError", _) => {
            "entry and exit nodes cannot fail; put `onError` on the node whose failure it handles"
        }
        ("retry", Parallel) => "a parallel node retries per branch: put `retry` in each branch",
        ("retry", _) => {
            "retries apply to calls: mcp nodes, each item of a map, each branch of a parallel"
        }
        ("timeoutMs", Parallel) => {
            "a parallel node has no whole-node timeout (the run's deadline bounds it): put `timeoutMs` in each branch"
        }
        ("timeoutMs", _) => {
            "timeouts apply to calls (mcp nodes, map items, parallel branches) and to ask nodes"
        }
        _ => return false,
    };
    diags.push(Diagnostic::misplaced_error_key(
        key.span,
        &text,
        owner,
        kind.name(),
        help,
    ));
    true
}

/// The extension keys of one node of a known type.
pub(super) fn node(
    decl: &mut NodeDecl,
    node: &Yaml,
    raw: &[(Yaml, Yaml)],
    kind: NodeType,
    owner: &str,
    diags: &mut Vec<Diagnostic>,
) {
    if let Some(value) = get(raw, "log") {
        decl.log = log(value, diags);
    }
    if matches!(kind, NodeType::Mcp | NodeType::Map | NodeType::Ask) {
        decl.timeout_ms = int(raw, "timeoutMs", 1, None, diags);
    }
    if matches!(kind, NodeType::Mcp | NodeType::Map) {
        decl.retry = get(raw, "retry").and_then(|r| retry(r, diags));
    }
    match kind {
        NodeType::Map => {
            decl.items = required_str(node, raw, "items", owner, diags);
            decl.concurrency = int(
                raw,
                "concurrency",
                1,
                Some(u64::from(MAX_CONCURRENCY)),
                diags,
            )
            .map(|c| Sp {
                value: c.value as u32,
                span: c.span,
            });
            decl.server = required_str(node, raw, "server", owner, diags);
            decl.tool = required_str(node, raw, "tool", owner, diags);
            decl.args = args(raw, diags);
            decl.on_item_error = on_item_error(raw, diags);
            let id = decl.id.as_ref().map_or("?", |i| i.value.as_str());
            if let Some((key, _)) = raw.iter().find(|(k, _)| k.as_str() == Some("branches")) {
                diags.push(Diagnostic::two_calls(key.span, "branches", id, "map"));
            }
        }
        NodeType::Parallel => {
            let id = decl
                .id
                .as_ref()
                .map_or("?", |i| i.value.as_str())
                .to_string();
            for (key, _) in raw {
                if let Some(k @ ("server" | "tool" | "args")) = key.as_str() {
                    diags.push(Diagnostic::two_calls(key.span, k, &id, "parallel"));
                }
            }
            match get(raw, "branches") {
                None => diags.push(Diagnostic::missing_key(key_span(node), "branches", owner)),
                Some(b) => decl.branches = branches(b, &id, diags),
            }
            decl.on_item_error = on_item_error(raw, diags);
        }
        NodeType::Ask => {
            decl.message = required_str(node, raw, "message", owner, diags);
            let id = decl
                .id
                .as_ref()
                .map_or("?", |i| i.value.as_str())
                .to_string();
            match get(raw, "schema") {
                None => diags.push(Diagnostic::missing_key(key_span(node), "schema", owner)),
                Some(schema) => {
                    if ask_schema(schema, &id, diags) {
                        decl.schema = Some(schema.clone());
                    }
                }
            }
        }
        _ => {}
    }
    if let Some(value) = get(raw, "onError")
        && !matches!(kind, NodeType::Entry | NodeType::Exit | NodeType::Switch)
    {
        decl.on_error = on_error(value, decl, kind, diags);
    }
}

/// The kinds a node of this type, as written, can fail with, in the order of extensions §1:
/// the kinds an `onError` route can actually take. See docs/extensions-checks.md for the table.
pub fn producible(decl: &NodeDecl, kind: NodeType) -> Vec<FailureKind> {
    use FailureKind as K;
    let call = |server: Option<&Sp<String>>, timeout: bool| -> Vec<FailureKind> {
        if server.is_some_and(|s| s.value == SELF_SERVER) {
            // In process: no protocol or connection; a callee's own failure arrives as `tool`;
            // there is no default per-call timeout for `self`, only the run's deadline (a limit).
            let mut k = vec![K::Expression, K::Tool, K::Schema];
            if timeout {
                k.push(K::Timeout);
            }
            k
        } else {
            // A downstream server always has a timeout (its own `timeoutMs` or the default).
            vec![
                K::Expression,
                K::Tool,
                K::Protocol,
                K::Connection,
                K::Timeout,
            ]
        }
    };
    let mut kinds = match kind {
        NodeType::Entry | NodeType::Exit | NodeType::Switch => Vec::new(),
        NodeType::Transform => vec![K::Expression],
        NodeType::Mcp => call(decl.server.as_ref(), decl.timeout_ms.is_some()),
        NodeType::Map => {
            // `items` itself can fail; items' failures fail the node only with `fail`.
            let mut k = vec![K::Expression];
            if decl.on_item_error == OnItemError::Fail {
                k.extend(call(decl.server.as_ref(), decl.timeout_ms.is_some()));
            }
            k
        }
        NodeType::Parallel if decl.on_item_error == OnItemError::Fail => decl
            .branches
            .iter()
            .flat_map(|b| call(b.server.as_ref(), b.timeout_ms.is_some()))
            .collect(),
        NodeType::Parallel => Vec::new(),
        NodeType::Ask => {
            // Without `timeoutMs` the question lasts until the run's deadline: a limit.
            let mut k = vec![K::Expression, K::Declined, K::Unavailable];
            if decl.timeout_ms.is_some() {
                k.push(K::Timeout);
            }
            k
        }
    };
    kinds.sort_by_key(|k| FailureKind::NAMED.iter().position(|n| n == k));
    kinds.dedup();
    kinds
}

/// The kinds `onError.kinds` may name on this node: those its type can fail with whatever its
/// server, `timeoutMs` or `onItemError` (extensions §9), with `schema` only where a `server: self`
/// call is made, as the contract says. Naming one of these that [`producible`] leaves out is a
/// route never taken (W0601); naming any other kind is an error (E0604).
pub fn nameable(decl: &NodeDecl, kind: NodeType) -> Vec<FailureKind> {
    use FailureKind as K;
    match kind {
        NodeType::Entry | NodeType::Exit | NodeType::Switch => Vec::new(),
        NodeType::Transform => vec![K::Expression],
        NodeType::Mcp | NodeType::Map | NodeType::Parallel => {
            let mut k = vec![
                K::Expression,
                K::Tool,
                K::Protocol,
                K::Connection,
                K::Timeout,
            ];
            if decl.calls_self() {
                k.push(K::Schema);
            }
            k
        }
        NodeType::Ask => vec![K::Expression, K::Timeout, K::Declined, K::Unavailable],
    }
}

/// An integer key in `min..=max`: E0101 for another type, E0601 out of range.
fn int(
    map: &[(Yaml, Yaml)],
    key: &str,
    min: u64,
    max: Option<u64>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Sp<u64>> {
    let value = get(map, key)?;
    let n = match value.kind {
        YamlKind::Int(i) => Some(i as f64),
        YamlKind::Float(f) => Some(f),
        _ => None,
    };
    let Some(n) = n else {
        diags.push(Diagnostic::wrong_type(
            value.span,
            &format!("`{key}`"),
            "an integer",
            value.kind_name(),
        ));
        return None;
    };
    let in_range =
        n.fract() == 0.0 && n >= min as f64 && max.is_none_or(|m| n <= m as f64) && n < 9.0e15;
    if !in_range {
        let wanted = match (min, max) {
            (_, Some(max)) => format!("an integer from {min} to {max}"),
            (0, None) => "an integer, 0 or more".to_string(),
            (1, None) => "an integer greater than 0".to_string(),
            (min, None) => format!("an integer, {min} or more"),
        };
        diags.push(Diagnostic::extension_value(
            value.span,
            format!("`{key}` must be {wanted}"),
            format!("expected {wanted}"),
        ));
        return None;
    }
    Some(Sp {
        value: n as u64,
        span: value.span,
    })
}

/// A `retry` block; `None` (diagnosed) when any part of it is wrong.
fn retry(node: &Yaml, diags: &mut Vec<Diagnostic>) -> Option<Retry> {
    let map = ext_mapping(node, "`retry`", RETRY_KEYS, diags)?;
    let errors = diags.len();
    let max_attempts = int(
        map,
        "maxAttempts",
        1,
        Some(u64::from(Retry::MAX_ATTEMPTS)),
        diags,
    );
    let delay = int(map, "delayMs", 0, None, diags);
    let max_delay = int(map, "maxDelayMs", 0, None, diags);
    let backoff_rate = match get(map, "backoffRate") {
        None => Some(Retry::DEFAULT_BACKOFF_RATE),
        Some(v) => match v.kind {
            YamlKind::Int(i) if i >= 1 => Some(i as f64),
            YamlKind::Float(f) if f >= 1.0 && f.is_finite() => Some(f),
            YamlKind::Int(_) | YamlKind::Float(_) => {
                diags.push(Diagnostic::extension_value(
                    v.span,
                    "`backoffRate` must be a number, 1 or more",
                    "expected a number, 1 or more",
                ));
                None
            }
            _ => {
                diags.push(Diagnostic::wrong_type(
                    v.span,
                    "`backoffRate`",
                    "a number",
                    v.kind_name(),
                ));
                None
            }
        },
    };
    let delay_ms = delay.as_ref().map_or(Retry::DEFAULT_DELAY_MS, |d| d.value);
    let max_delay_ms = max_delay
        .as_ref()
        .map_or(Retry::DEFAULT_MAX_DELAY_MS, |d| d.value);
    // Compared only when both are valid or defaulted: a wrong one is already reported.
    let valid = |key: &str, parsed: bool| parsed || get(map, key).is_none();
    if delay_ms > max_delay_ms
        && valid("delayMs", delay.is_some())
        && valid("maxDelayMs", max_delay.is_some())
    {
        // Point at whichever of the two was written (the other is its default).
        let span = delay.as_ref().map_or_else(
            || max_delay.as_ref().map_or(node.span, |m| m.span),
            |d| d.span,
        );
        let cap = max_delay.as_ref().map_or(span, |m| m.span);
        let mut d = Diagnostic::delay_over_cap(span, cap, delay_ms, max_delay_ms);
        if cap == span {
            d.labels.clear();
        }
        diags.push(d);
    }
    let kinds = match get(map, "kinds") {
        None => Some(Retry::DEFAULT_KINDS.to_vec()),
        Some(list) => kind_list(list, "`retry.kinds`", diags, &mut |kind| {
            (!Retry::RETRYABLE.contains(&kind)).then(|| {
                let why = match kind {
                    FailureKind::Expression | FailureKind::Schema => {
                        "it fails the same way on every attempt"
                    }
                    FailureKind::Declined | FailureKind::Unavailable => {
                        "only ask nodes fail with it, and asks are not retried"
                    }
                    _ => "it is a graph bug, never caught",
                };
                Diagnostic::retry_kinds(
                    Span::default(),
                    format!("`{kind}` failures cannot be retried: {why}"),
                    "cannot be retried",
                )
            })
        })
        .map(|k| k.into_iter().map(|k| k.value).collect()),
    };
    if diags.len() > errors {
        return None;
    }
    Some(Retry {
        max_attempts: max_attempts.map_or(1, |m| m.value as u32),
        delay_ms,
        backoff_rate: backoff_rate?,
        max_delay_ms,
        kinds: kinds?,
    })
}

/// A list of kind names: non-empty, known, no duplicates, and accepted by `refuse` (which
/// returns the diagnostic for a kind not allowed here, or a warning for one allowed but never
/// taken; its span is filled in). A warning keeps the list; an error drops it. The code of the
/// empty, unknown and duplicate diagnostics follows the list: `retry.kinds` → E0602, else E0604.
fn kind_list(
    list: &Yaml,
    what: &str,
    diags: &mut Vec<Diagnostic>,
    refuse: &mut dyn FnMut(FailureKind) -> Option<Diagnostic>,
) -> Option<Vec<Sp<FailureKind>>> {
    let report = |span: Span, message: String, label: &str| -> Diagnostic {
        if what == "`retry.kinds`" {
            Diagnostic::retry_kinds(span, message, label)
        } else {
            Diagnostic::on_error_kinds(
                span,
                message,
                label,
                "`onError.kinds` lists, once each, kinds this node can fail with; leave it out to catch every kind",
            )
        }
    };
    let YamlKind::Seq(items) = &list.kind else {
        diags.push(Diagnostic::wrong_type(
            list.span,
            what,
            "a sequence of failure kinds",
            list.kind_name(),
        ));
        return None;
    };
    if items.is_empty() {
        diags.push(report(
            list.span,
            format!("{what} is empty"),
            "no kinds listed",
        ));
        return None;
    }
    let mut out: Vec<Sp<FailureKind>> = Vec::new();
    let mut ok = true;
    for item in items {
        let Some(name) = item.as_str() else {
            diags.push(Diagnostic::wrong_type(
                item.span,
                "a failure kind",
                "a string",
                item.kind_name(),
            ));
            ok = false;
            continue;
        };
        let Some(kind) = FailureKind::named(name) else {
            let suggestion = did_you_mean(name, FailureKind::NAMED.iter().map(|k| k.as_str()));
            let mut d = report(
                item.span,
                format!("unknown failure kind `{name}` in {what}"),
                "not a failure kind",
            );
            if let Some(s) = suggestion {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
            diags.push(d);
            ok = false;
            continue;
        };
        if let Some(first) = out.iter().find(|k| k.value == kind) {
            diags.push(
                report(
                    item.span,
                    format!("`{name}` is listed twice in {what}"),
                    "listed again",
                )
                .with_label(first.span, "first listed here"),
            );
            ok = false;
            continue;
        }
        if let Some(mut d) = refuse(kind) {
            d.location = crate::diagnostics::Location::Graph(item.span);
            // A dead kind (W0601) is harmless in the route: it simply never matches.
            if d.is_error() {
                ok = false;
            }
            diags.push(d);
        }
        out.push(Sp {
            value: kind,
            span: item.span,
        });
    }
    ok.then_some(out)
}

fn on_error(
    value: &Yaml,
    decl: &NodeDecl,
    kind: NodeType,
    diags: &mut Vec<Diagnostic>,
) -> Option<OnErrorDecl> {
    match &value.kind {
        YamlKind::Str(s) => Some(OnErrorDecl {
            span: value.span,
            next: Some(Sp {
                value: s.clone(),
                span: value.span,
            }),
            kinds: None,
        }),
        YamlKind::Map(_) => {
            let map = ext_mapping(value, "`onError`", ON_ERROR_KEYS, diags)?;
            let next = required_str(value, map, "next", "`onError`", diags);
            let producible = producible(decl, kind);
            let can = producible
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ");
            // Wrong kinds (diagnosed) leave the route in place, so that reachability does not
            // add warnings about its target.
            let kinds = get(map, "kinds").map(|list| {
                kind_list(list, "`onError.kinds`", diags, &mut |k| {
                    refuse_on_error(k, decl, kind, &producible, &can)
                })
                .unwrap_or_default()
                .into_iter()
                .map(|k| k.value)
                .collect()
            });
            Some(OnErrorDecl {
                span: value.span,
                next: Some(next?),
                kinds,
            })
        }
        _ => {
            diags.push(Diagnostic::wrong_type(
                value.span,
                "`onError`",
                "a node id or a mapping `{ next, kinds }`",
                value.kind_name(),
            ));
            None
        }
    }
}

/// The diagnostic for a kind in `onError.kinds` that this node never fails with, with the
/// reason: W0601 when its type can fail with it (the route is dead, not wrong: another
/// `timeoutMs`, server or `onItemError` would make it live), else E0604.
fn refuse_on_error(
    k: FailureKind,
    decl: &NodeDecl,
    kind: NodeType,
    producible: &[FailureKind],
    can: &str,
) -> Option<Diagnostic> {
    if producible.contains(&k) {
        return None;
    }
    let id = decl.id.as_ref().map_or("?", |i| i.value.as_str());
    let can = if can.is_empty() {
        format!("as written, this {} node cannot fail at all", kind.name())
    } else {
        format!("this node can fail with {can}")
    };
    if nameable(decl, kind).contains(&k) {
        let why = never_taken_because(decl, kind, k);
        return Some(Diagnostic::on_error_kind_never_taken(
            Span::default(),
            kind.name(),
            id,
            k.as_str(),
            format!("{why}; {can}"),
        ));
    }
    let why = match k {
        FailureKind::Route => {
            Some("`route` (a switch with no match) is a graph bug and is never caught".to_string())
        }
        FailureKind::Declined | FailureKind::Unavailable => {
            Some(format!("only ask nodes fail with `{k}`"))
        }
        FailureKind::Schema => Some("only `server: self` calls fail with `schema`".to_string()),
        _ => None,
    };
    let help = match why {
        Some(why) => format!("{why}; {can}"),
        None => can,
    };
    Some(Diagnostic::on_error_kinds(
        Span::default(),
        format!("{} node `{id}` never fails with `{k}`", kind.name()),
        "cannot happen here",
        help,
    ))
}

/// Why a node whose type can fail with `k` cannot as written (the start of a W0601 help): the
/// setting that rules it out, and how to make the route live.
fn never_taken_because(decl: &NodeDecl, kind: NodeType, k: FailureKind) -> String {
    let fans_out = matches!(kind, NodeType::Map | NodeType::Parallel);
    if fans_out && decl.on_item_error != OnItemError::Fail {
        let setting = if decl.on_item_error == OnItemError::Skip {
            "skip"
        } else {
            "keep"
        };
        return if kind == NodeType::Map {
            format!(
                "with `onItemError: {setting}` a failed item does not fail the map, so only `items` can (kind `expression`)"
            )
        } else {
            format!("with `onItemError: {setting}` a failed branch does not fail the parallel node")
        };
    }
    if kind == NodeType::Parallel && decl.branches.is_empty() {
        return "the parallel node has no branches".to_string();
    }
    match (k, kind) {
        (FailureKind::Timeout, NodeType::Ask) => {
            "without `timeoutMs` the question lasts until the run's deadline, a limit that is never caught: add `timeoutMs` to give it a timeout of its own".to_string()
        }
        (FailureKind::Timeout, NodeType::Parallel) => {
            "every branch is a `server: self` call without `timeoutMs`: only the run's deadline bounds them, a limit that is never caught".to_string()
        }
        (FailureKind::Timeout, _) => {
            "a `server: self` call without `timeoutMs` has no timeout of its own: only the run's deadline bounds it, a limit that is never caught".to_string()
        }
        (FailureKind::Protocol | FailureKind::Connection, NodeType::Parallel) => format!(
            "every branch is a `server: self` call, run in process: no server is there to fail with `{k}`"
        ),
        (FailureKind::Protocol | FailureKind::Connection, _) => format!(
            "a `server: self` call runs in process: no server is there to fail with `{k}`"
        ),
        _ => format!("as written, this {} node never fails with `{k}`", kind.name()),
    }
}

fn on_item_error(map: &[(Yaml, Yaml)], diags: &mut Vec<Diagnostic>) -> OnItemError {
    let Some(value) = get(map, "onItemError") else {
        return OnItemError::Fail;
    };
    match value.as_str() {
        Some("fail") => OnItemError::Fail,
        Some("skip") => OnItemError::Skip,
        Some("keep") => OnItemError::Keep,
        Some(other) => {
            let mut d = Diagnostic::extension_value(
                value.span,
                format!("unknown `onItemError` value `{other}`"),
                "expected fail, skip or keep",
            );
            if let Some(s) = did_you_mean(other, ["fail", "skip", "keep"]) {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
            diags.push(d);
            OnItemError::Fail
        }
        None => {
            diags.push(Diagnostic::wrong_type(
                value.span,
                "`onItemError`",
                "one of fail, skip, keep",
                value.kind_name(),
            ));
            OnItemError::Fail
        }
    }
}

fn branches(value: &Yaml, node: &str, diags: &mut Vec<Diagnostic>) -> Vec<BranchDecl> {
    let Some(entries) = value.as_map() else {
        diags.push(Diagnostic::wrong_type(
            value.span,
            "`branches`",
            "a mapping of branch names to calls",
            value.kind_name(),
        ));
        return Vec::new();
    };
    if entries.is_empty() {
        diags.push(Diagnostic::empty_branches(value.span, node));
    }
    let mut out = Vec::new();
    for (key, body) in entries {
        let name = Sp {
            value: key.key_text(),
            span: key.span,
        };
        let owner = format!("branch `{}` of node `{node}`", name.value);
        let Some(map) = ext_mapping(body, &owner, BRANCH_KEYS, diags) else {
            continue;
        };
        out.push(BranchDecl {
            server: required_str(body, map, "server", &owner, diags),
            tool: required_str(body, map, "tool", &owner, diags),
            args: args(map, diags),
            timeout_ms: int(map, "timeoutMs", 1, None, diags),
            retry: get(map, "retry").and_then(|r| retry(r, diags)),
            name,
        });
    }
    out
}

/// Whether an ask's schema is a flat object of primitive properties (extensions §7).
fn ask_schema(schema: &Yaml, node: &str, diags: &mut Vec<Diagnostic>) -> bool {
    let before = diags.len();
    if schema.as_map().is_none() {
        diags.push(Diagnostic::wrong_type(
            schema.span,
            "`schema`",
            "a mapping",
            schema.kind_name(),
        ));
        return false;
    }
    match schema.get("type") {
        Some(t) if t.as_str() == Some("object") => {}
        Some(t) => diags.push(Diagnostic::ask_schema(
            t.span,
            node,
            "must be `type: object`",
            "not `object`",
        )),
        None => diags.push(Diagnostic::ask_schema(
            key_span(schema),
            node,
            "must say `type: object`",
            "no `type`",
        )),
    }
    let properties = schema.get("properties");
    if properties.is_none() {
        diags.push(Diagnostic::ask_schema(
            key_span(schema),
            node,
            "must list its `properties` (what to ask for)",
            "no `properties`",
        ));
    }
    if let Some(properties) = properties {
        match properties.as_map() {
            None => diags.push(Diagnostic::ask_schema(
                properties.span,
                node,
                "must have a mapping of `properties`",
                "not a mapping",
            )),
            Some(props) => {
                for (key, prop) in props {
                    let name = key.key_text();
                    let ty = prop.get("type");
                    let problem = match ty.and_then(Yaml::as_str) {
                        _ if prop.as_map().is_none() => {
                            Some((prop.span, format!("property `{name}` is not a mapping")))
                        }
                        None if ty.is_none() => {
                            Some((key.span, format!("property `{name}` has no `type`")))
                        }
                        None => ty.map(|t| {
                            (
                                t.span,
                                format!("property `{name}` must have one type, written as a string"),
                            )
                        }),
                        Some("string" | "number" | "integer" | "boolean") => None,
                        Some(other) => ty.map(|t| {
                            (
                                t.span,
                                format!(
                                    "property `{name}` is of type `{other}`: only string, number, integer and boolean can be asked"
                                ),
                            )
                        }),
                    };
                    if let Some((span, problem)) = problem {
                        diags.push(Diagnostic::ask_schema(
                            span,
                            node,
                            problem,
                            "not a primitive property",
                        ));
                        continue;
                    }
                    // The protocol's string formats (MCP elicitation, 2025-06-18 and later).
                    const FORMATS: &[&str] = &["email", "uri", "date", "date-time"];
                    if ty.and_then(Yaml::as_str) == Some("string")
                        && let Some(format) = prop.get("format")
                        && !format.as_str().is_some_and(|f| FORMATS.contains(&f))
                    {
                        diags.push(Diagnostic::ask_schema(
                            format.span,
                            node,
                            format!(
                                "property `{name}`: an asked string's `format` is one of email, uri, date, date-time"
                            ),
                            "not a format the protocol allows",
                        ));
                    }
                    if ty.and_then(Yaml::as_str) != Some("string") {
                        for word in ["enum", "format"] {
                            if let Some(v) = prop.get(word) {
                                diags.push(Diagnostic::ask_schema(
                                    v.span,
                                    node,
                                    format!("property `{name}`: `{word}` is allowed only on string properties"),
                                    "only on strings",
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    diags.len() == before
}

/// `log: "<JSONata>"` (level info) or `log: {level, message}`: what a node logs after it runs.
fn log(value: &Yaml, diags: &mut Vec<Diagnostic>) -> Option<LogDecl> {
    if let Some(text) = value.as_str() {
        return Some(LogDecl {
            level: LogLevel::Info,
            message: Sp {
                value: text.to_string(),
                span: value.span,
            },
        });
    }
    if value.as_map().is_none() {
        diags.push(Diagnostic::wrong_type(
            value.span,
            "`log`",
            "a JSONata string, or a mapping with `message` and `level`",
            value.kind_name(),
        ));
        return None;
    }
    let entries = ext_mapping(value, "`log`", LOG_KEYS, diags)?;
    let message = required_str(value, entries, "message", "`log`", diags);
    let level = match get(entries, "level") {
        None => Some(LogLevel::Info),
        Some(level) => {
            let parsed = level.as_str().and_then(LogLevel::parse);
            if parsed.is_none() {
                let words: Vec<&str> = LogLevel::ALL.iter().map(|l| l.name()).collect();
                let mut diagnostic = Diagnostic::extension_value(
                    level.span,
                    format!(
                        "`log.level` must be one of {}, not {}",
                        words.join(", "),
                        match level.as_str() {
                            Some(word) => format!("`{word}`"),
                            None => level.kind_name().to_string(),
                        }
                    ),
                    "not a log level",
                );
                if let Some(word) = level.as_str()
                    && let Some(meant) = did_you_mean(word, words.iter().copied())
                {
                    diagnostic = diagnostic.with_help(format!("did you mean `{meant}`?"));
                }
                diags.push(diagnostic);
            }
            parsed
        }
    };
    Some(LogDecl {
        level: level?,
        message: message?,
    })
}
