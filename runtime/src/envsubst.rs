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

/// Expands against the process environment.
pub fn expand_env(text: &str) -> String {
    expand(text, |name| std::env::var(name).ok())
}

#[cfg(test)]
mod tests {
    use super::expand;

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
