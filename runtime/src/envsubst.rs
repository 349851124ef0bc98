//! `${VAR}` and `${VAR:-default}` in server configurations, expanded at run time so that no
//! secret is baked into a built binary.

/// Expands `${NAME}` (empty when unset) and `${NAME:-default}` (default when unset or empty).
/// `$$` is a literal `$`; anything else is kept as written.
pub fn expand(text: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
            continue;
        }
        if let Some(body) = after.strip_prefix('{')
            && let Some(end) = body.find('}')
        {
            let inner = &body[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (inner, None),
            };
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                let value = lookup(name).filter(|v| !(default.is_some() && v.is_empty()));
                out.push_str(&value.or(default.map(str::to_string)).unwrap_or_default());
                rest = &body[end + 1..];
                continue;
            }
        }
        out.push('$');
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Expands against the process environment, and remembers each value taken from it so that
/// [`redact`] can hide it again: error texts and logs show the configuration as written.
pub fn expand_env(text: &str) -> String {
    expand(text, |name| {
        let value = std::env::var(name).ok();
        if let Some(value) = &value {
            remember(name, value);
        }
        value
    })
}

/// Values shorter than this are not hidden: they would hide every `1` or `on` in a message,
/// and are no secrets.
const SHORTEST_SECRET: usize = 4;

/// `(value, "${NAME}")` of every variable expanded so far, longest value first. Read for every
/// line written to stderr, from every thread (a log line per call): a lock readers share.
static EXPANDED: std::sync::RwLock<Vec<(String, String)>> = std::sync::RwLock::new(Vec::new());

fn remember(name: &str, value: &str) {
    if value.len() < SHORTEST_SECRET {
        return;
    }
    if let Ok(mut expanded) = EXPANDED.write()
        && !expanded.iter().any(|(v, _)| v == value)
    {
        expanded.push((value.to_string(), format!("${{{name}}}")));
        expanded.sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
    }
}

/// `text` with every value [`expand_env`] took from the environment written back as the
/// `${NAME}` it came from.
pub fn redact(text: &str) -> std::borrow::Cow<'_, str> {
    let Ok(expanded) = EXPANDED.read() else {
        return text.into();
    };
    let mut out = std::borrow::Cow::Borrowed(text);
    for (value, written) in expanded.iter() {
        if out.contains(value.as_str()) {
            out = out.replace(value.as_str(), written).into();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{expand, redact, remember};

    #[test]
    fn expanded_values_are_written_back_as_their_variables() {
        remember("MCPGRAPH_REDACT_TEST", "s3cr3t-value");
        remember("MCPGRAPH_REDACT_SHORT", "on");
        assert_eq!(
            redact("GET http://h/?token=s3cr3t-value failed, on"),
            "GET http://h/?token=${MCPGRAPH_REDACT_TEST} failed, on"
        );
    }

    #[test]
    fn expands_variables_and_defaults() {
        let lookup = |n: &str| match n {
            "HOME" => Some("/home/u".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        assert_eq!(expand("${HOME}/x", lookup), "/home/u/x");
        assert_eq!(expand("${NOPE}", lookup), "");
        assert_eq!(expand("${NOPE:-warn}", lookup), "warn");
        assert_eq!(expand("${EMPTY:-d}", lookup), "d");
        assert_eq!(expand("${EMPTY}", lookup), "");
        assert_eq!(
            expand("$$HOME and $HOME and ${bad name}", lookup),
            "$HOME and $HOME and ${bad name}"
        );
        assert_eq!(expand("Bearer ${HOME:-x}y", lookup), "Bearer /home/uy");
    }
}
