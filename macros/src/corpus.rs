//! The expressions and documents for the native-JSONata differential test. Each one runs through
//! the generated Rust and through jsonata-core's interpreter, and the two results must agree.
//! There are two sources: the official JSONata suite read from disk, and seeded pseudo-random
//! expressions and inputs within the subset the native compiler handles. The proc macro reads
//! them when it expands, so the cases are fixed when the test compiles.
//!
//! Everything here is deterministic: directory listings are sorted, and the generators draw from
//! a splitmix64 stream of their seed. The macro crate has no `rand`, and a test corpus has no
//! need for one. Every generated binary sub-expression is parenthesised, so a difference in
//! operator precedence can never be what the two evaluators disagree on.

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One case of the JSONata suite: an expression, its input, its variable bindings and its origin.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteCase {
    /// The JSONata expression.
    pub expr: String,
    /// The input document; `None` when the case has no input (`null` or absent in the suite).
    pub data: Option<Value>,
    /// Variables bound before evaluation, without the `$`.
    pub bindings: Map<String, Value>,
    /// `group/file#index`, with the file's name without `.json`; the index counts within the file.
    pub name: String,
}

/// The cases of the JSONata suite at `root` (`groups/<group>/*.json`, `datasets/<name>.json`).
/// Groups and files are sorted by name. A case with no `expr` (such as one with `expr-file`) is
/// skipped.
pub fn jsonata_suite(root: &Path) -> Result<Vec<SuiteCase>, String> {
    let mut datasets = BTreeMap::new();
    let mut cases = Vec::new();
    for group in sorted_entries(&root.join("groups"))? {
        if !group.is_dir() {
            continue;
        }
        let group_name = name_of(group.file_name());
        for file in sorted_entries(&group)? {
            if !file.is_file() || file.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let file_stem = name_of(file.file_stem());
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            // A few cases hold lone UTF-16 surrogates (`"\ud800"`), which no Rust string can:
            // serde_json refuses them, and they are left out.
            let Ok(parsed) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            // A file holds one case or an array of them.
            let objects = match parsed {
                Value::Array(items) => items,
                single => vec![single],
            };
            for (index, object) in objects.into_iter().enumerate() {
                let name = format!("{group_name}/{file_stem}#{index}");
                if let Some(case) = suite_case(root, &mut datasets, name, object)? {
                    cases.push(case);
                }
            }
        }
    }
    Ok(cases)
}

/// `count` JSONata expressions from `seed`: first a fixed catalogue, one of each form, and then
/// random ones up to depth 4.
pub fn generate(seed: u64, count: usize) -> Vec<String> {
    let mut expressions: Vec<String> = CATALOGUE
        .iter()
        .take(count)
        .map(|e| (*e).to_owned())
        .collect();
    let mut rng = Rng::new(seed);
    while expressions.len() < count {
        // The root is never a bare leaf: the catalogue already has each leaf form.
        expressions.push(composite(&mut rng, MAX_DEPTH - 1));
    }
    expressions
}

/// `count` JSON documents from `seed`: first `{}`, `null`, `[]`, a flat object with every field
/// and a few fixed shapes, then random ones up to four containers deep.
pub fn inputs(seed: u64, count: usize) -> Vec<Value> {
    let mut documents = fixed_inputs();
    documents.truncate(count);
    let mut rng = Rng::new(seed);
    while documents.len() < count {
        documents.push(document(&mut rng));
    }
    documents
}

// ---------------------------------------------------------------------------------------------
// The suite

/// One case object as a `SuiteCase`, or `None` when it has no `expr`.
fn suite_case(
    root: &Path,
    datasets: &mut BTreeMap<String, Value>,
    name: String,
    object: Value,
) -> Result<Option<SuiteCase>, String> {
    let Value::Object(case) = object else {
        return Err(format!("{name}: a case is not an object"));
    };
    let Some(Value::String(expr)) = case.get("expr") else {
        return Ok(None);
    };
    // Inline `data` wins; `data: null` falls through to `dataset`, as does a missing `data`.
    let data = match case.get("data") {
        None | Some(Value::Null) => match case.get("dataset") {
            None | Some(Value::Null) => None,
            Some(Value::String(dataset)) => Some(load_dataset(root, datasets, dataset)?),
            Some(other) => return Err(format!("{name}: `dataset` is {other}, not a name")),
        },
        Some(data) => Some(data.clone()),
    };
    let bindings = match case.get("bindings") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(bindings)) => bindings.clone(),
        Some(other) => return Err(format!("{name}: `bindings` is {other}, not an object")),
    };
    Ok(Some(SuiteCase {
        expr: expr.clone(),
        data,
        bindings,
        name,
    }))
}

/// `datasets/<name>.json` under `root`, read once however many cases name it.
fn load_dataset(
    root: &Path,
    datasets: &mut BTreeMap<String, Value>,
    name: &str,
) -> Result<Value, String> {
    if let Some(data) = datasets.get(name) {
        return Ok(data.clone());
    }
    let path = root.join("datasets").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read dataset {}: {e}", path.display()))?;
    let data: Value = serde_json::from_str(&text)
        .map_err(|e| format!("dataset {} is not JSON: {e}", path.display()))?;
    datasets.insert(name.to_owned(), data.clone());
    Ok(data)
}

/// The entries of `directory`, sorted so that the corpus does not depend on the file system's
/// order.
fn sorted_entries(directory: &Path) -> Result<Vec<PathBuf>, String> {
    let read_error = |e: std::io::Error| format!("cannot list {}: {e}", directory.display());
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(directory).map_err(read_error)? {
        entries.push(entry.map_err(read_error)?.path());
    }
    entries.sort();
    Ok(entries)
}

/// A file name component as text (lossily: the suite's names are ASCII).
fn name_of(component: Option<&std::ffi::OsStr>) -> String {
    component
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The pseudo-random source

/// splitmix64 (Steele, Lea and Flood, 2014): one `u64` of state, and every seed (0 included)
/// gives a well-mixed stream.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`). The modulo bias is far below anything a corpus could notice.
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// One of `items`, which is never empty here (every caller passes a constant table).
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// ---------------------------------------------------------------------------------------------
// Expressions

/// The deepest nesting of composite expressions (operators, constructors, calls).
const MAX_DEPTH: usize = 4;

/// The field names both generators use. The test binds `$item` and `$index`, and gives the
/// history of a node `n1`.
const FIELDS: &[&str] = &["a", "b", "c", "n", "s", "list", "x y"];

/// One of each form, so that every form is tested whatever the seed and however few random
/// expressions follow.
const CATALOGUE: &[&str] = &[
    // Literals.
    "0",
    "42",
    "-3",
    "0.5",
    "1e3",
    "1e308",
    r#""a\"b""#,
    r#""é""#,
    r#""""#,
    "true",
    "false",
    "null",
    // Paths and variables.
    "a",
    "a.b",
    "a.b.c",
    "`x y`",
    "list.a",
    "$",
    "$.a",
    "$.a.b",
    "$item",
    "$index",
    "$item.a",
    // Operators, with the type errors, undefined operands and arrays they must handle.
    "(n + 1)",
    "(n - 0.5)",
    "(n * -2)",
    "(n / 4)",
    "(n % 3)",
    "(1 / 0)",
    "(1e308 * 10)",
    r#"("x" + 1)"#,
    "(true < 2)",
    "(c + 1)",
    "(list + 1)",
    "(list = 1)",
    "([1, 2] < 3)",
    "(a = b)",
    "(a != b)",
    // With a string literal, compared with its text: strings, other values, undefined.
    r#"(s = "abc")"#,
    r#"("abc" != s)"#,
    r#"(c = "a")"#,
    r#"(c != "a")"#,
    r#"(list = ",")"#,
    r#"(n != "10")"#,
    r#"("a" = "a")"#,
    "(n < 2)",
    "(n <= 2)",
    "(s > \"a\")",
    "(s >= \"a\")",
    "(a and b)",
    "(c or true)",
    r#"(s & "!")"#,
    "(c ?? 1)",
    "-(n)",
    "-(s)",
    "(a ? 1 : 2)",
    "(c ? 1)",
    // Constructors.
    "{}",
    r#"{"k": a, "m": b}"#,
    r#"{"k": c}"#,
    "[]",
    "[a, b]",
    "[[1]]",
    "[c]",
    // Node history.
    r#"$executionCount("n1")"#,
    r#"$nodeExecution("n1", -1)"#,
    r#"$nodeExecution("n1", 0).a"#,
    "$previousNode()",
    "$previousNode().a",
    r#"$nodeExecutions("n1")"#,
    r#"$nodeExecutions("n1").a"#,
    // The same history call made more than once (compiled code makes it once), and calls that
    // fail on their literal arguments.
    r#"($nodeExecution("n1", -1).a + $nodeExecution("n1", -1).a)"#,
    r#"[$nodeExecution("n1", 5), $nodeExecution("n1", 5), $nodeExecution("n2", -1)]"#,
    r#"($executionCount("n1") = 2 ? $nodeExecution("n1", 0) : $nodeExecution("n1", 0).list)"#,
    r#"$nodeExecution("n1", "x")"#,
    r#"($nodeExecution("n1", 0).a & $executionCount(1))"#,
    // The first step of paths from one history call, made once per object constructor (and
    // once for the whole input), whatever the input; an undefined value among the keys.
    r#"{"x": $nodeExecution("n1", -1).a, "y": $nodeExecution("n1", -1).list.a, "z": $nodeExecution("n1", 0).a}"#,
    r#"{"o": {"p": $nodeExecution("n1", -1).a, "q": c}, "r": $nodeExecution("n1", -1).list, "s": $nodeExecution("n1", -1).a}"#,
    r#"[$nodeExecution("n1", -1).a, {"t": $nodeExecution("n1", -1).list.a, "u": $nodeExecution("n1", -1).a}, $nodeExecution("n1", -1).list]"#,
    r#"{"a": 1, "b": c, "d": $previousNode().a, "e": $previousNode().a}"#,
    // Built-in functions.
    "$string(a)",
    "$length(s)",
    "$count(list)",
    "$sum(list)",
    "$exists(c)",
    "$not(a)",
    "$boolean(list)",
    "$number(s)",
    "$uppercase(s)",
    r#"$substringBefore(s, "b")"#,
    r#"$join(list, ",")"#,
    "$keys($)",
    "$append(list, a)",
    // The fused `$count($split(x, "sep"))` (compiled to a direct count), over strings and what
    // is not one (the original call's answer or error), one-byte and longer separators.
    r#"$count($split(s, "b"))"#,
    r#"$count($split(s, "\n"))"#,
    r#"$count($split(s, "ab"))"#,
    r#"$count($split(list, ","))"#,
    r#"$count($split(c, "é"))"#,
    r#"$count($split($string(a), "."))"#,
];

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "7",
    "10",
    "42",
    "100",
    "-1",
    "-3",
    "0.5",
    "1.5",
    "-2.25",
    "0.1",
    "1e3",
    "2.5e-3",
    "1e21",
    "1e308",
    "123456789012",
];

/// String literals as JSONata source text, escapes included.
const STRINGS: &[&str] = &[
    r#""""#,
    r#""a""#,
    r#""abc""#,
    r#""a\"b""#,
    r#""é""#,
    r#""日本""#,
    r#""x y""#,
    r#""10""#,
    r#""true""#,
    r#""line\nbreak""#,
    r#""\u00e9""#,
    r#"",""#,
];

const ARITHMETIC: &[&str] = &["+", "-", "*", "/", "%"];
const COMPARISON: &[&str] = &["=", "!=", "<", "<=", ">", ">="];
const OTHER_OPERATORS: &[&str] = &["and", "or", "&", "??"];

/// Keys of object constructors; none needs escaping, so each is written between quotes as it is.
const OBJECT_KEYS: &[&str] = &["k", "m", "a", "x y", "é"];

/// What a built-in's argument is drawn from: half the time a value of the kind it expects, so
/// that calls succeed as well as fail.
#[derive(Clone, Copy)]
enum Argument {
    Any,
    Text,
    List,
    Object,
}

const FUNCTIONS: &[(&str, &[Argument])] = &[
    ("string", &[Argument::Any]),
    ("length", &[Argument::Text]),
    ("count", &[Argument::List]),
    ("sum", &[Argument::List]),
    ("exists", &[Argument::Any]),
    ("not", &[Argument::Any]),
    ("boolean", &[Argument::Any]),
    ("number", &[Argument::Any]),
    ("uppercase", &[Argument::Text]),
    ("substringBefore", &[Argument::Text, Argument::Text]),
    ("join", &[Argument::List, Argument::Text]),
    ("keys", &[Argument::Object]),
    ("append", &[Argument::List, Argument::Any]),
];

/// An expression whose composites nest at most `depth` deep.
fn expression(rng: &mut Rng, depth: usize) -> String {
    if depth == 0 || rng.one_in(3) {
        leaf(rng)
    } else {
        composite(rng, depth - 1)
    }
}

/// An operator, conditional, constructor or call whose operands nest at most `depth` deep.
fn composite(rng: &mut Rng, depth: usize) -> String {
    match rng.below(20) {
        0..=7 => binary(rng, depth),
        8 => format!("-({})", expression(rng, depth)),
        9..=10 => conditional(rng, depth),
        11..=12 => object_constructor(rng, depth),
        13..=14 => array_constructor(rng, depth),
        _ => call(rng, depth),
    }
}

/// Operands are unconstrained, so `"x" + 1`, `true < 2` and missing fields come often; one right
/// operand in six is an array constructor, so arrays in arithmetic and comparisons do too.
fn binary(rng: &mut Rng, depth: usize) -> String {
    let operator = match rng.below(10) {
        0..=3 => rng.pick(ARITHMETIC),
        4..=6 => rng.pick(COMPARISON),
        _ => rng.pick(OTHER_OPERATORS),
    };
    let left = expression(rng, depth);
    let right = if rng.one_in(6) {
        array_constructor(rng, depth)
    } else {
        expression(rng, depth)
    };
    format!("({left} {operator} {right})")
}

fn conditional(rng: &mut Rng, depth: usize) -> String {
    let condition = expression(rng, depth);
    let then = expression(rng, depth);
    if rng.one_in(3) {
        format!("({condition} ? {then})")
    } else {
        let otherwise = expression(rng, depth);
        format!("({condition} ? {then} : {otherwise})")
    }
}

/// Zero to three entries with distinct keys: a duplicate key is an error of its own, not one
/// this corpus is after.
fn object_constructor(rng: &mut Rng, depth: usize) -> String {
    let mut keys = OBJECT_KEYS.to_vec();
    let mut entries = Vec::new();
    for _ in 0..rng.below(4) {
        let key = keys.swap_remove(rng.below(keys.len()));
        entries.push(format!("\"{key}\": {}", expression(rng, depth)));
    }
    format!("{{{}}}", entries.join(", "))
}

fn array_constructor(rng: &mut Rng, depth: usize) -> String {
    if rng.one_in(5) {
        return format!("[[{}]]", expression(rng, depth));
    }
    let items: Vec<String> = (0..rng.below(4)).map(|_| expression(rng, depth)).collect();
    format!("[{}]", items.join(", "))
}

fn call(rng: &mut Rng, depth: usize) -> String {
    let (name, parameters) = *rng.pick(FUNCTIONS);
    let arguments: Vec<String> = parameters
        .iter()
        .map(|parameter| argument(rng, depth, *parameter))
        .collect();
    format!("${name}({})", arguments.join(", "))
}

fn argument(rng: &mut Rng, depth: usize, kind: Argument) -> String {
    let fitting = rng.one_in(2);
    match kind {
        Argument::Text if fitting => rng.pick(STRINGS).to_string(),
        Argument::List if fitting => array_constructor(rng, depth),
        Argument::Object if fitting => object_constructor(rng, depth),
        _ => expression(rng, depth),
    }
}

/// A literal, path, variable or node-history call.
fn leaf(rng: &mut Rng) -> String {
    match rng.below(12) {
        0..=2 => rng.pick(NUMBERS).to_string(),
        3..=4 => rng.pick(STRINGS).to_string(),
        5 => rng.pick(&["true", "false", "null"]).to_string(),
        6..=8 => path(rng),
        9 => match rng.below(4) {
            0 => "$item".to_owned(),
            1 => "$index".to_owned(),
            _ => format!("$item.{}", path(rng)),
        },
        10 => history(rng),
        _ => {
            if rng.one_in(3) {
                "$".to_owned()
            } else {
                format!("$.{}", path(rng))
            }
        }
    }
}

/// One to three field steps, without predicates or other stages.
fn path(rng: &mut Rng) -> String {
    let steps: Vec<String> = (0..1 + rng.below(3))
        .map(|_| field(rng.pick::<&str>(FIELDS)))
        .collect();
    steps.join(".")
}

/// A field step: backticks around a name that is not an identifier.
fn field(name: &str) -> String {
    if name.contains(' ') {
        format!("`{name}`")
    } else {
        name.to_owned()
    }
}

/// One of the history functions on node `n1`. Index 1 is past the end whenever `n1` ran once.
fn history(rng: &mut Rng) -> String {
    let index = rng.pick(&[-1, 0, 1]);
    match rng.below(7) {
        0 => r#"$executionCount("n1")"#.to_owned(),
        1 => format!(r#"$nodeExecution("n1", {index})"#),
        2 => format!(
            r#"$nodeExecution("n1", {index}).{}"#,
            field(rng.pick::<&str>(FIELDS))
        ),
        3 => "$previousNode()".to_owned(),
        4 => format!("$previousNode().{}", field(rng.pick::<&str>(FIELDS))),
        5 => r#"$nodeExecutions("n1")"#.to_owned(),
        _ => format!(
            r#"$nodeExecutions("n1").{}"#,
            field(rng.pick::<&str>(FIELDS))
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs

/// The most containers a generated document nests, the document itself included.
const MAX_NESTING: usize = 4;

const INPUT_STRINGS: &[&str] = &[
    "",
    "a",
    "abc",
    "Hello World",
    "é",
    "日本語",
    "a\"b",
    "10",
    "true",
    " ",
    "x y",
];
const INPUT_INTEGERS: &[i64] = &[0, 1, 2, 3, -1, -7, 10, 42, 100, 1_000_000];
const INPUT_FRACTIONS: &[f64] = &[0.5, -0.5, 1.25, 3.75, 0.1, 0.2, -2.5, 1e21, 1e-7];

/// The edge cases every run has, whatever the seed.
fn fixed_inputs() -> Vec<Value> {
    use serde_json::json;
    vec![
        json!({}),
        json!(null),
        json!([]),
        json!({"a": 1, "b": "two", "c": true, "n": 3.5, "s": "é", "list": [1, 2, 3], "x y": null}),
        json!({"a": {"b": {"c": 1}}, "list": [{"a": 1}, {"a": 2, "b": "x"}], "n": -2, "s": ""}),
        json!([{"a": 1}, {"a": "x"}, {}]),
        json!({"a": [], "b": {}, "list": [[1, 2], [3]], "n": 0, "s": "abc", "c": false}),
        json!({"a": [5], "b": [{"c": 1}], "list": ["a", "b"], "n": 0.5, "x y": "space"}),
        // Objects shaped like jsonata-core's internal tuples, which paths and `$` treat apart.
        json!({"a": {"@": 1, "__tuple__": true, "b": 2}, "list": [{"@": {"a": 5}, "__tuple__": true}], "b": {"@": "x"}}),
        // More keys than compiled paths compare one by one before they hash.
        json!({"a": 1, "b": {"c": 2}, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "list": [1], "n": 9, "s": "many"}),
    ]
}

/// Mostly objects, since most expressions read fields.
fn document(rng: &mut Rng) -> Value {
    match rng.below(10) {
        0..=6 => object(rng, MAX_NESTING),
        7..=8 => array(rng, MAX_NESTING),
        _ => value(rng, MAX_NESTING),
    }
}

/// A value that may use `levels` more containers; a scalar when it has none.
fn value(rng: &mut Rng, levels: usize) -> Value {
    if levels == 0 {
        return scalar(rng);
    }
    match rng.below(10) {
        0..=4 => scalar(rng),
        5..=7 => object(rng, levels),
        _ => array(rng, levels),
    }
}

/// Each field is there three times in five, so missing fields are common. `levels` is at least 1.
fn object(rng: &mut Rng, levels: usize) -> Value {
    let mut fields = Map::new();
    for name in FIELDS {
        if rng.below(5) < 3 {
            fields.insert((*name).to_owned(), value(rng, levels - 1));
        }
    }
    Value::Object(fields)
}

/// Empty, single-item and longer arrays, of objects, of arrays, of one scalar type (which `$sum`
/// and `$join` accept) or mixed. `levels` is at least 1.
fn array(rng: &mut Rng, levels: usize) -> Value {
    let length = match rng.below(6) {
        0 => 0,
        1..=2 => 1,
        _ => 2 + rng.below(3),
    };
    let inner = levels - 1;
    let items: Vec<Value> = match rng.below(4) {
        0 if inner > 0 => (0..length).map(|_| object(rng, inner)).collect(),
        1 if inner > 0 => (0..length).map(|_| array(rng, inner)).collect(),
        2 => {
            let numbers = rng.one_in(2);
            (0..length)
                .map(|_| if numbers { number(rng) } else { string(rng) })
                .collect()
        }
        _ => (0..length).map(|_| value(rng, inner)).collect(),
    };
    Value::Array(items)
}

fn scalar(rng: &mut Rng) -> Value {
    match rng.below(20) {
        0..=7 => number(rng),
        8..=13 => string(rng),
        14..=16 => Value::Bool(rng.one_in(2)),
        _ => Value::Null,
    }
}

fn number(rng: &mut Rng) -> Value {
    if rng.one_in(3) {
        Value::from(*rng.pick(INPUT_FRACTIONS))
    } else {
        Value::from(*rng.pick(INPUT_INTEGERS))
    }
}

fn string(rng: &mut Rng) -> Value {
    Value::from(*rng.pick(INPUT_STRINGS))
}
