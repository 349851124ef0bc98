//! The drawing of a tool that `GET /api/graph` sends (docs/studio.md): boxes for the nodes,
//! polylines for the edges, the size of the whole.
//!
//! The layout is a small layered (Sugiyama) drawing written here rather than the `layout-rs`
//! crate. Measured on 2026-12-01 in a scratch crate: layout-rs 0.1.3 (MIT, last release April
//! 2025, 6,256 lines) cost 8.2 s of release build and 193 KB of binary (445,904 -> 639,264
//! bytes for a hello-world laying out 9 nodes), and it does give positions, through a custom
//! `RenderBackend` that records `draw_rect` and `draw_arrow`. What it gives is not what the
//! page needs, though: edges come as cubic Bézier control pairs (to flatten into polylines),
//! back edges come out reversed (from the loop's head to its tail) and wind through the middle
//! of the drawing instead of around it, edge labels take layout slots as nodes, and its
//! lowering, placer and renderer hold 21 `assert!`/`unwrap()`/`unreachable!` outside tests
//! (each a panic when a graph's shape breaks an assumption), where the studio lays out every
//! version of a file being edited. An adapter would be some 120 lines and still leave loops
//! hard to read; the layout below is some 490 lines (with comments), indexes only what it
//! built, and draws loops the way the debugger wants them: around the right side.
//!
//! The steps, for graphs of 2 to 60 nodes (every step is at most quadratic):
//! 1. Back edges (an edge to a node on the depth-first stack from the entry) are found and left
//!    out of ranking; the rank of a node is its longest path from the entry over the other
//!    edges, and the exit goes to the last rank.
//! 2. An edge spanning several ranks gets a dummy vertex in each rank between, so it passes
//!    between boxes, never through them.
//! 3. The order within each rank comes from barycenter sweeps (down, then up), keeping the
//!    order with the fewest crossings.
//! 4. x: each rank starts centred; then each vertex is pulled towards the mean of its
//!    neighbours' centres under the order and a minimum gap (isotonic regression, exact).
//! 5. Forward edges leave the bottom border and enter the top border (ports spread along the
//!    border); back edges leave the bottom, run in the gap below, up a lane right of everything
//!    they pass, and enter the target's top from the gap above it.
//!
//! Pseudo nodes: a map's per-item call `<map id>/call` is drawn right of the map in its rank,
//! joined by an `item` edge. A parallel's branches `<parallel id>/<branch>` take the rank below
//! it, with a `branch` edge from the parallel to each branch and a `branch` edge from each
//! branch to the parallel's `next` (the rejoin); the parallel itself then has no `next` edge,
//! since the rejoin edges are where control goes after it.

use mcpgraph_compiler::ir::{Call, EdgeKind, Graph, NodeKind, Target, Tool};
use serde_json::{Map, Value, json};

/// The drawing of one tool as `GET /api/graph` sends it (docs/studio.md): nodes with their
/// boxes, edges with their polylines and labels, the drawing's size. The graph is needed for
/// the names of the servers an mcp node, a map or a branch calls.
pub fn tool_view(graph: &Graph, tool: &Tool) -> Value {
    let (mut boxes, edges) = model(graph, tool);
    let drawing = layout(&mut boxes, &edges, tool.entry.index(), tool.exit.index());
    let nodes: Vec<Value> = boxes
        .iter()
        .map(|b| {
            json!({
                "id": b.id, "type": b.kind, "label": b.label, "detail": b.detail,
                "x": num(b.x), "y": num(b.y), "width": num(b.w), "height": num(b.h),
            })
        })
        .collect();
    let edges: Vec<Value> = edges
        .iter()
        .zip(&drawing.routes)
        .map(|(e, route)| {
            json!({
                "from": boxes[e.from].id, "to": boxes[e.to].id, "kind": e.kind, "label": e.label,
                "points": route.iter().map(|&(x, y)| json!([num(x), num(y)])).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut out = Map::new();
    out.insert("name".into(), json!(tool.name));
    out.insert("description".into(), json!(tool.description));
    out.insert("inputSchema".into(), tool.input_schema.clone());
    if let Some(schema) = &tool.output_schema {
        out.insert("outputSchema".into(), schema.clone());
    }
    out.insert("width".into(), num(drawing.width));
    out.insert("height".into(), num(drawing.height));
    out.insert("nodes".into(), Value::Array(nodes));
    out.insert("edges".into(), Value::Array(edges));
    Value::Object(out)
}

/// A JSON Logic rule in readable infix form: `{"<": [{"var": "$.a.counter"}, {"var":
/// "$.a.target"}]}` gives `a.counter < a.target`. At most [`LABEL_CHARS`] characters (longer
/// ends with an ellipsis). A rule of the IR gives its JSON with `Rule::to_json`.
pub fn rule_text(rule: &Value) -> String {
    shorten(&infix(rule).0, LABEL_CHARS)
}

/// The longest edge label, in characters.
const LABEL_CHARS: usize = 60;

// ---------------------------------------------------------------------------------------------
// Rule text

/// Binding strength of what [`infix`] returns: a part is parenthesised where it binds less
/// than its place needs.
const P_IF: u8 = 0;
const P_OR: u8 = 1;
const P_AND: u8 = 2;
const P_NOT: u8 = 3;
const P_COMPARE: u8 = 4;
const P_ADD: u8 = 5;
const P_MUL: u8 = 6;
const P_UNARY: u8 = 7;
const P_ATOM: u8 = 9;

/// The text of a rule and how strongly it binds.
fn infix(rule: &Value) -> (String, u8) {
    match rule {
        Value::Array(items) => (
            format!(
                "[{}]",
                items
                    .iter()
                    .map(|r| infix(r).0)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            P_ATOM,
        ),
        Value::Object(map) if map.len() == 1 => {
            let Some((op, operand)) = map.iter().next() else {
                return (rule.to_string(), P_ATOM);
            };
            // json-logic-js: a non-array operand is a one-element argument list.
            let args: Vec<&Value> = match operand {
                Value::Array(items) => items.iter().collect(),
                Value::Null if op != "var" => Vec::new(),
                single => vec![single],
            };
            operation(op, &args)
        }
        other => (other.to_string(), P_ATOM),
    }
}

fn operation(op: &str, args: &[&Value]) -> (String, u8) {
    // Each argument's text, parenthesised unless it binds at least `at_least`.
    let part = |arg: &Value, at_least: u8| {
        let (text, strength) = infix(arg);
        if strength < at_least {
            format!("({text})")
        } else {
            text
        }
    };
    match (op, args) {
        ("var", [path, rest @ ..]) if rest.len() <= 1 => {
            let path = match path {
                Value::String(s) => var_path(s),
                other => other.to_string(),
            };
            match rest {
                [default] => (format!("{path} ?? {}", part(default, P_UNARY)), P_COMPARE),
                _ => (path, P_ATOM),
            }
        }
        ("var", []) => ("$".into(), P_ATOM),
        ("<" | "<=" | ">" | ">=" | "==" | "===" | "!=" | "!==", [_, _])
        | ("<" | "<=", [_, _, _]) => (
            args.iter()
                .map(|a| part(a, P_COMPARE + 1))
                .collect::<Vec<_>>()
                .join(&format!(" {op} ")),
            P_COMPARE,
        ),
        ("in", [item, list]) => (
            format!(
                "{} in {}",
                part(item, P_COMPARE + 1),
                part(list, P_COMPARE + 1)
            ),
            P_COMPARE,
        ),
        ("and" | "or", [_, _, ..]) => (
            args.iter()
                .map(|a| part(a, P_NOT))
                .collect::<Vec<_>>()
                .join(&format!(" {op} ")),
            if op == "and" { P_AND } else { P_OR },
        ),
        ("and" | "or", [only]) => infix(only),
        ("!", [x]) => (format!("not {}", part(x, P_UNARY)), P_NOT),
        ("!!", [x]) => (format!("bool({})", infix(x).0), P_ATOM),
        ("-" | "+", [x]) => (format!("{op}{}", part(x, P_UNARY)), P_UNARY),
        ("+" | "*", [first, rest @ ..]) if !rest.is_empty() => {
            let strength = if op == "+" { P_ADD } else { P_MUL };
            let mut text = part(first, strength);
            for arg in rest {
                text.push_str(&format!(" {op} {}", part(arg, strength + 1)));
            }
            (text, strength)
        }
        ("-" | "/" | "%", [left, right]) => {
            let strength = if op == "-" { P_ADD } else { P_MUL };
            (
                format!(
                    "{} {op} {}",
                    part(left, strength),
                    part(right, strength + 1)
                ),
                strength,
            )
        }
        ("if" | "?:", [_, _, ..]) => {
            let mut text = String::new();
            let mut rest = args;
            while let [condition, then, tail @ ..] = rest {
                if !text.is_empty() {
                    text.push_str(" else ");
                }
                text.push_str(&format!(
                    "if {} then {}",
                    part(condition, P_OR),
                    part(then, P_OR)
                ));
                rest = tail;
            }
            if let [otherwise] = rest {
                text.push_str(&format!(" else {}", part(otherwise, P_OR)));
            }
            (text, P_IF)
        }
        _ => (
            format!(
                "{op}({})",
                args.iter()
                    .map(|a| infix(a).0)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            P_ATOM,
        ),
    }
}

/// A var's path as a reader wants it: the graph context's `$.` left out.
fn var_path(path: &str) -> String {
    let path = path.trim();
    match path.strip_prefix("$.") {
        Some(rest) => rest.to_string(),
        None if path.is_empty() => "$".to_string(),
        None => path.to_string(),
    }
}

/// At most `chars` characters, the last an ellipsis when something was cut.
fn shorten(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_string()
    } else {
        let mut out: String = text.chars().take(chars.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

// ---------------------------------------------------------------------------------------------
// What is drawn

/// One box: a node of the tool, or a pseudo node (a map's call, a parallel's branch).
struct NodeBox {
    id: String,
    kind: &'static str,
    label: String,
    detail: String,
    w: f64,
    h: f64,
    x: f64,
    y: f64,
    /// A map's call: drawn right of its map (this index), in its rank, outside the ranking.
    beside: Option<usize>,
}

struct EdgeSpec {
    from: usize,
    to: usize,
    kind: &'static str,
    label: String,
}

const BOX_HEIGHT: f64 = 44.0;
const MIN_BOX_WIDTH: f64 = 120.0;
/// The label is drawn at about 7.5 px a character, the detail smaller.
const LABEL_PX: f64 = 7.5;
const DETAIL_PX: f64 = 6.5;
const BOX_PADDING: f64 = 24.0;
const DETAIL_CHARS: usize = 30;

fn new_box(id: String, kind: &'static str, label: String, detail: String) -> NodeBox {
    let text =
        (label.chars().count() as f64 * LABEL_PX).max(detail.chars().count() as f64 * DETAIL_PX);
    NodeBox {
        id,
        kind,
        label,
        detail,
        w: (text + BOX_PADDING).max(MIN_BOX_WIDTH).ceil(),
        h: BOX_HEIGHT,
        x: 0.0,
        y: 0.0,
        beside: None,
    }
}

/// What a call calls: `server.tool` (`self.tool` for a tool of this graph).
fn call_text(graph: &Graph, call: &Call) -> String {
    let server = match call.target {
        Target::Server(id) => graph
            .servers
            .get(id.0 as usize)
            .map_or("?", |s| s.name.as_str()),
        Target::SelfTool(_) => "self",
    };
    format!("{server}.{}", call.tool)
}

/// The first non-empty line of an expression, shortened for a box.
fn first_line(source: &str) -> String {
    let line = source.lines().map(str::trim).find(|l| !l.is_empty());
    shorten(line.unwrap_or(""), DETAIL_CHARS)
}

/// The boxes (the tool's nodes at their indices, then pseudo nodes) and the edges.
fn model(graph: &Graph, tool: &Tool) -> (Vec<NodeBox>, Vec<EdgeSpec>) {
    let mut boxes: Vec<NodeBox> = tool
        .nodes
        .iter()
        .map(|node| {
            let detail = match &node.kind {
                NodeKind::Mcp(call) => call_text(graph, call),
                NodeKind::Map { items, .. } => {
                    format!("map items: {}", first_line(&items.source))
                }
                NodeKind::Ask { message, .. } => first_line(&message.source),
                NodeKind::Transform(expr) => first_line(&expr.source),
                NodeKind::Parallel { branches, .. } => match branches.len() {
                    1 => "1 branch".to_string(),
                    n => format!("{n} branches"),
                },
                other => other.type_name().to_string(),
            };
            new_box(
                node.id.clone(),
                node.kind.type_name(),
                node.id.clone(),
                detail,
            )
        })
        .collect();
    let mut edges = Vec::new();
    let edge = |from: usize, to: usize, kind: &'static str, label: String| EdgeSpec {
        from,
        to,
        kind,
        label,
    };
    for (index, node) in tool.nodes.iter().enumerate() {
        // A map's per-item call: a box beside the map, joined by an `item` edge before the
        // map's own edges.
        if let NodeKind::Map { call, .. } = &node.kind {
            let pseudo = boxes.len();
            let mut b = new_box(
                format!("{}/call", node.id),
                "item",
                "each item".into(),
                call_text(graph, call),
            );
            b.beside = Some(index);
            boxes.push(b);
            edges.push(edge(index, pseudo, "item", String::new()));
        }
        // A parallel's branches: a box each, through which its `next` edge is drawn.
        let mut branch_boxes = Vec::new();
        if let NodeKind::Parallel { branches, .. } = &node.kind {
            for branch in branches {
                branch_boxes.push(boxes.len());
                boxes.push(new_box(
                    format!("{}/{}", node.id, branch.name),
                    "branch",
                    branch.name.clone(),
                    call_text(graph, &branch.call),
                ));
            }
            // Checked, a parallel always has a `next`; were it absent, the branches would
            // still hang from the parallel.
            if node.next.is_none() {
                for &pseudo in &branch_boxes {
                    edges.push(edge(index, pseudo, "branch", String::new()));
                }
            }
        }
        for successor in node.successors() {
            let to = successor.to.index();
            match successor.kind {
                EdgeKind::Condition(at) => {
                    let rule = match &node.kind {
                        NodeKind::Switch { conditions } => {
                            conditions.get(at).and_then(|c| c.rule.as_ref())
                        }
                        _ => None,
                    };
                    edges.push(match rule {
                        Some(rule) => edge(index, to, "rule", rule_text(&rule.to_json())),
                        // A rule-less condition is taken whenever it is reached: a default.
                        None => edge(index, to, "default", "otherwise".into()),
                    });
                }
                EdgeKind::Default => {
                    edges.push(edge(index, to, "default", "otherwise".into()));
                }
                // The rejoin: from each branch to the parallel's `next`, which stands for the
                // parallel's own edge.
                EdgeKind::Next if !branch_boxes.is_empty() => {
                    for &pseudo in &branch_boxes {
                        edges.push(edge(index, pseudo, "branch", String::new()));
                        edges.push(edge(pseudo, to, "branch", String::new()));
                    }
                }
                EdgeKind::Next => edges.push(edge(index, to, "next", String::new())),
                EdgeKind::OnError => {
                    let label = match node.on_error.as_ref().and_then(|r| r.kinds.as_ref()) {
                        None => "any error".to_string(),
                        Some(kinds) => kinds
                            .iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    };
                    edges.push(edge(index, to, "onError", label));
                }
            }
        }
    }
    (boxes, edges)
}

// ---------------------------------------------------------------------------------------------
// Layout

const MARGIN: f64 = 40.0;
/// Between boxes of one rank.
const GAP_X: f64 = 40.0;
/// Between a map and its call.
const GAP_BESIDE: f64 = 30.0;
/// Between ranks: room for edge labels and the back edges' horizontal runs.
const GAP_Y: f64 = 64.0;
/// The width a long edge takes in a rank it passes.
const DUMMY_WIDTH: f64 = 12.0;
/// Back edges: first lane right of what they pass, lane spacing, run spacing in a gap.
const LANE_OFFSET: f64 = 24.0;
const LANE_SPACING: f64 = 16.0;
const RUN_OFFSET: f64 = 10.0;
const RUN_SPACING: f64 = 7.0;

struct Drawing {
    /// One polyline per edge, in the order of the edges.
    routes: Vec<Vec<(f64, f64)>>,
    width: f64,
    height: f64,
}

/// A vertex of the layered graph: a box, or a place a long edge passes in a rank.
struct Vertex {
    rank: usize,
    /// The box, or `None` for a dummy.
    node: Option<usize>,
    /// The width of its slot in the rank (a map's slot holds its call too).
    width: f64,
    x: f64,
}

fn layout(boxes: &mut [NodeBox], edges: &[EdgeSpec], entry: usize, exit: usize) -> Drawing {
    let count = boxes.len();
    let ranked = |i: usize| boxes[i].beside.is_none();
    // Edges the ranking sees: not a map's item edge, not a loop on one node.
    let mut out_edges: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (e, edge) in edges.iter().enumerate() {
        if ranked(edge.from) && ranked(edge.to) && edge.from != edge.to {
            out_edges[edge.from].push(e);
        }
    }

    // 1. Depth-first search from the entry (then from whatever it does not reach): back edges,
    // and the postorder, whose reverse orders the other edges.
    let mut back = vec![false; edges.len()];
    let mut state = vec![0u8; count]; // 0 unseen, 1 on the stack, 2 done
    let mut postorder = Vec::with_capacity(count);
    let mut discovery = vec![usize::MAX; count];
    let mut discovered = 0;
    for root in std::iter::once(entry).chain(0..count) {
        if root >= count || state[root] != 0 || !ranked(root) {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        discovery[root] = discovered;
        discovered += 1;
        while let Some(&mut (v, ref mut at)) = stack.last_mut() {
            if let Some(&e) = out_edges[v].get(*at) {
                *at += 1;
                let to = edges[e].to;
                match state[to] {
                    0 => {
                        state[to] = 1;
                        discovery[to] = discovered;
                        discovered += 1;
                        stack.push((to, 0));
                    }
                    1 => back[e] = true,
                    _ => {}
                }
            } else {
                state[v] = 2;
                postorder.push(v);
                stack.pop();
            }
        }
    }

    // Ranks: the longest path over the forward edges, the exit last.
    let mut rank = vec![0usize; count];
    for &v in postorder.iter().rev() {
        for &e in &out_edges[v] {
            if !back[e] {
                let to = edges[e].to;
                rank[to] = rank[to].max(rank[v] + 1);
            }
        }
    }
    if exit < count && out_edges[exit].iter().all(|&e| back[e]) {
        rank[exit] = (0..count)
            .filter(|&i| ranked(i))
            .map(|i| rank[i])
            .max()
            .unwrap_or(0);
    }
    for i in 0..count {
        if let Some(owner) = boxes[i].beside {
            rank[i] = rank[owner];
        }
    }
    let ranks = (0..count).map(|i| rank[i] + 1).max().unwrap_or(1);

    // 2. Vertices: the ranked boxes, then a dummy per rank a forward edge passes.
    let mut vertices: Vec<Vertex> = Vec::new();
    let mut vertex_of = vec![usize::MAX; count];
    for i in 0..count {
        if ranked(i) {
            vertex_of[i] = vertices.len();
            let beside: f64 = (0..count)
                .filter(|&j| boxes[j].beside == Some(i))
                .map(|j| GAP_BESIDE + boxes[j].w)
                .sum();
            vertices.push(Vertex {
                rank: rank[i],
                node: Some(i),
                width: boxes[i].w + beside,
                x: 0.0,
            });
        }
    }
    // Per forward edge, its chain of vertices from source to target.
    let mut chains: Vec<Vec<usize>> = vec![Vec::new(); edges.len()];
    for (e, edge) in edges.iter().enumerate() {
        if back[e] || !ranked(edge.from) || !ranked(edge.to) || edge.from == edge.to {
            continue;
        }
        let mut chain = vec![vertex_of[edge.from]];
        for r in rank[edge.from] + 1..rank[edge.to] {
            chain.push(vertices.len());
            vertices.push(Vertex {
                rank: r,
                node: None,
                width: DUMMY_WIDTH,
                x: 0.0,
            });
        }
        chain.push(vertex_of[edge.to]);
        chains[e] = chain;
    }
    let mut up: Vec<Vec<usize>> = vec![Vec::new(); vertices.len()];
    let mut down: Vec<Vec<usize>> = vec![Vec::new(); vertices.len()];
    for chain in &chains {
        for pair in chain.windows(2) {
            down[pair[0]].push(pair[1]);
            up[pair[1]].push(pair[0]);
        }
    }

    // 3. Order within ranks: first by discovery (a dummy after its source), then barycenter
    // sweeps, keeping the order with the fewest crossings.
    let mut layers: Vec<Vec<usize>> = vec![Vec::new(); ranks];
    let mut first_key = vec![0usize; vertices.len()];
    for (v, vertex) in vertices.iter().enumerate() {
        first_key[v] = match vertex.node {
            Some(i) => discovery[i].min(count) * 2,
            None => 0,
        };
    }
    for chain in &chains {
        for pair in chain.windows(2) {
            if vertices[pair[1]].node.is_none() {
                first_key[pair[1]] = first_key[pair[0]] + 1;
            }
        }
    }
    for (v, vertex) in vertices.iter().enumerate() {
        layers[vertex.rank].push(v);
    }
    for layer in &mut layers {
        layer.sort_by_key(|&v| (first_key[v], v));
    }
    let mut best = layers.clone();
    let mut best_crossings = crossings(&layers, &down, vertices.len());
    for _ in 0..8 {
        for r in 1..ranks {
            sweep(&mut layers, r, r - 1, &up, vertices.len());
        }
        for r in (0..ranks.saturating_sub(1)).rev() {
            sweep(&mut layers, r, r + 1, &down, vertices.len());
        }
        let now = crossings(&layers, &down, vertices.len());
        if now < best_crossings {
            best_crossings = now;
            best = layers.clone();
        }
    }
    let layers = best;

    // 4. x: centred ranks, then pulled towards the neighbours.
    let widest = layers
        .iter()
        .map(|l| row_width(l, &vertices))
        .fold(0.0, f64::max);
    for layer in &layers {
        let mut x = (widest - row_width(layer, &vertices)) / 2.0;
        for &v in layer {
            vertices[v].x = x;
            x += vertices[v].width + GAP_X;
        }
    }
    for _ in 0..4 {
        for layer in layers.iter().skip(1) {
            pull(layer, &up, &mut vertices, boxes);
        }
        for layer in layers.iter().rev().skip(1) {
            pull(layer, &down, &mut vertices, boxes);
        }
    }
    let left = vertices.iter().map(|v| v.x).fold(f64::INFINITY, f64::min);
    let shift = if left.is_finite() {
        MARGIN - left
    } else {
        MARGIN
    };
    for vertex in &mut vertices {
        vertex.x = (vertex.x + shift).round();
    }
    let row_top = |r: usize| MARGIN + r as f64 * (BOX_HEIGHT + GAP_Y);
    for vertex in &vertices {
        if let Some(i) = vertex.node {
            boxes[i].x = vertex.x;
            boxes[i].y = row_top(vertex.rank);
        }
    }
    for i in 0..count {
        if let Some(owner) = boxes[i].beside {
            let before: f64 = (0..i)
                .filter(|&j| boxes[j].beside == Some(owner))
                .map(|j| GAP_BESIDE + boxes[j].w)
                .sum();
            boxes[i].x = boxes[owner].x + boxes[owner].w + before + GAP_BESIDE;
            boxes[i].y = boxes[owner].y;
        }
    }

    // 5. Routes. Ports: where each edge meets a box's bottom (leaving) or top (entering),
    // ordered by where the other end is, back edges rightmost.
    let centre_of = |v: usize, vertices: &[Vertex]| match vertices[v].node {
        Some(i) => boxes[i].x + boxes[i].w / 2.0,
        None => vertices[v].x + DUMMY_WIDTH / 2.0,
    };
    let mut bottom: Vec<Vec<(f64, usize)>> = vec![Vec::new(); count];
    let mut top: Vec<Vec<(f64, usize)>> = vec![Vec::new(); count];
    for (e, edge) in edges.iter().enumerate() {
        if back[e] {
            bottom[edge.from].push((f64::INFINITY, e));
            top[edge.to].push((f64::INFINITY, e));
        } else if chains[e].len() >= 2 {
            let after = chains[e][1];
            let before = chains[e][chains[e].len() - 2];
            bottom[edge.from].push((centre_of(after, &vertices), e));
            top[edge.to].push((centre_of(before, &vertices), e));
        }
    }
    let port = |ports: &mut Vec<(f64, usize)>, b: &NodeBox| -> Vec<(usize, f64)> {
        ports.sort_by(|a, c| a.0.total_cmp(&c.0).then(a.1.cmp(&c.1)));
        let k = ports.len() as f64;
        ports
            .iter()
            .enumerate()
            .map(|(i, &(_, e))| (e, (b.x + b.w * (i as f64 + 1.0) / (k + 1.0)).round()))
            .collect()
    };
    let mut out_x = vec![0.0; edges.len()];
    let mut in_x = vec![0.0; edges.len()];
    for i in 0..count {
        for (e, x) in port(&mut bottom[i], &boxes[i]) {
            out_x[e] = x;
        }
        for (e, x) in port(&mut top[i], &boxes[i]) {
            in_x[e] = x;
        }
    }

    // The right edge of what each rank holds, for the back edges' lanes.
    let mut rank_right = vec![0.0f64; ranks];
    for vertex in &vertices {
        rank_right[vertex.rank] = rank_right[vertex.rank].max(vertex.x + vertex.width);
    }
    // Back edges: inner loops (fewer ranks) take the inner lanes.
    let mut back_edges: Vec<usize> = (0..edges.len()).filter(|&e| back[e]).collect();
    back_edges.sort_by_key(|&e| (rank[edges[e].from].abs_diff(rank[edges[e].to]), e));
    let mut lanes: Vec<(usize, usize, f64)> = Vec::new(); // (top rank, bottom rank, x)
    let mut runs_in_gap = vec![0usize; ranks + 1]; // gap r is above rank r
    let mut routes: Vec<Vec<(f64, f64)>> = vec![Vec::new(); edges.len()];
    let mut label_right = 0.0f64;
    for &e in &back_edges {
        let edge = &edges[e];
        // A back edge goes up: its target is an ancestor, of a lower rank.
        let (high, low) = (
            rank[edge.to].min(rank[edge.from]),
            rank[edge.to].max(rank[edge.from]),
        );
        let mut lane = rank_right[high..=low].iter().copied().fold(0.0, f64::max) + LANE_OFFSET;
        for &(a, b, x) in &lanes {
            if a <= low && high <= b {
                lane = lane.max(x + LANE_SPACING);
            }
        }
        lanes.push((high, low, lane));
        let below = low + 1;
        let run_low =
            row_top(low) + BOX_HEIGHT + RUN_OFFSET + RUN_SPACING * runs_in_gap[below] as f64;
        runs_in_gap[below] += 1;
        let run_high = row_top(high) - RUN_OFFSET - RUN_SPACING * runs_in_gap[high] as f64;
        runs_in_gap[high] += 1;
        let from = &boxes[edge.from];
        let to = &boxes[edge.to];
        routes[e] = vec![
            (out_x[e], from.y + from.h),
            (out_x[e], run_low),
            (lane, run_low),
            (lane, run_high),
            (in_x[e], run_high),
            (in_x[e], to.y),
        ];
        // The page writes a back edge's label beside its lane.
        label_right = label_right.max(lane + 8.0 + edge.label.chars().count() as f64 * DETAIL_PX);
    }
    for (e, edge) in edges.iter().enumerate() {
        if back[e] {
            continue;
        }
        let from = &boxes[edge.from];
        let to = &boxes[edge.to];
        routes[e] = if edge.from == edge.to {
            // A node that routes to itself: a small loop on its left side.
            vec![
                (from.x, from.y + 12.0),
                (from.x - 20.0, from.y + 12.0),
                (from.x - 20.0, from.y + 32.0),
                (from.x, from.y + 32.0),
            ]
        } else if from.beside.is_some() || to.beside.is_some() {
            // A map and its call, side by side (the call on the right).
            let y = (from.y + from.h / 2.0).round();
            vec![(from.x + from.w, y), (to.x, y)]
        } else {
            let chain = &chains[e];
            let mut points = vec![(out_x[e], from.y + from.h)];
            for &v in &chain[1..chain.len().saturating_sub(1)] {
                let x = centre_of(v, &vertices);
                let y = row_top(vertices[v].rank);
                points.push((x, y));
                points.push((x, y + BOX_HEIGHT));
            }
            points.push((in_x[e], to.y));
            points
        };
    }

    let mut width = label_right;
    let mut height = 0.0f64;
    for b in boxes.iter() {
        width = width.max(b.x + b.w);
        height = height.max(b.y + b.h);
    }
    for route in &routes {
        for &(x, y) in route {
            width = width.max(x);
            height = height.max(y);
        }
    }
    Drawing {
        routes,
        width: (width + MARGIN).ceil(),
        height: (height + MARGIN).ceil(),
    }
}

fn row_width(layer: &[usize], vertices: &[Vertex]) -> f64 {
    let sum: f64 = layer.iter().map(|&v| vertices[v].width).sum();
    sum + GAP_X * layer.len().saturating_sub(1) as f64
}

/// Reorders `layers[r]` by the mean position of each vertex's neighbours in `layers[fixed]`
/// (a vertex without any keeps its place).
fn sweep(layers: &mut [Vec<usize>], r: usize, fixed: usize, near: &[Vec<usize>], n: usize) {
    let mut position = vec![0.0f64; n];
    for (i, &v) in layers[fixed].iter().enumerate() {
        position[v] = i as f64;
    }
    let keys: Vec<(f64, usize)> = layers[r]
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let around: Vec<f64> = near[v].iter().map(|&u| position[u]).collect();
            let key = if around.is_empty() {
                i as f64
            } else {
                around.iter().sum::<f64>() / around.len() as f64
            };
            (key, v)
        })
        .collect();
    let mut keyed = keys;
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
    layers[r] = keyed.into_iter().map(|(_, v)| v).collect();
}

/// Edge crossings between adjacent ranks.
fn crossings(layers: &[Vec<usize>], down: &[Vec<usize>], n: usize) -> usize {
    let mut position = vec![0usize; n];
    for layer in layers {
        for (i, &v) in layer.iter().enumerate() {
            position[v] = i;
        }
    }
    let mut total = 0;
    for layer in layers {
        let segments: Vec<(usize, usize)> = layer
            .iter()
            .flat_map(|&v| down[v].iter().map(move |&w| (v, w)))
            .map(|(v, w)| (position[v], position[w]))
            .collect();
        for (i, a) in segments.iter().enumerate() {
            for b in &segments[i + 1..] {
                if (a.0 < b.0 && a.1 > b.1) || (a.0 > b.0 && a.1 < b.1) {
                    total += 1;
                }
            }
        }
    }
    total
}

/// Moves the vertices of one rank towards the mean centre of their neighbours in `near`,
/// keeping their order and gaps: the least-squares placement, by pooling adjacent violators.
fn pull(layer: &[usize], near: &[Vec<usize>], vertices: &mut [Vertex], boxes: &[NodeBox]) {
    // The centre a vertex is drawn at, and how far it is from its slot's left side.
    let centre = |v: usize, vertices: &[Vertex]| match vertices[v].node {
        Some(i) => vertices[v].x + boxes[i].w / 2.0,
        None => vertices[v].x + DUMMY_WIDTH / 2.0,
    };
    let inset = |v: usize, vertices: &[Vertex]| centre(v, vertices) - vertices[v].x;
    // Slot i must start at least `offset[i]` after slot 0; with x_i = offset_i + y_i the order
    // holds when y is non-decreasing, so y is the isotonic fit of the wanted x minus offset.
    let mut offset = 0.0;
    let mut wanted: Vec<f64> = Vec::with_capacity(layer.len());
    let mut offsets: Vec<f64> = Vec::with_capacity(layer.len());
    for &v in layer {
        let around: Vec<f64> = near[v].iter().map(|&u| centre(u, vertices)).collect();
        let target = if around.is_empty() {
            vertices[v].x
        } else {
            around.iter().sum::<f64>() / around.len() as f64 - inset(v, vertices)
        };
        wanted.push(target - offset);
        offsets.push(offset);
        offset += vertices[v].width + GAP_X;
    }
    // Pool adjacent violators: blocks of (sum, count), merged while a block's mean is below
    // the one before it.
    let mut blocks: Vec<(f64, usize)> = Vec::new();
    for &w in &wanted {
        blocks.push((w, 1));
        while blocks.len() >= 2 {
            let (s2, c2) = blocks[blocks.len() - 1];
            let (s1, c1) = blocks[blocks.len() - 2];
            if s1 / c1 as f64 > s2 / c2 as f64 {
                blocks.pop();
                blocks.pop();
                blocks.push((s1 + s2, c1 + c2));
            } else {
                break;
            }
        }
    }
    let mut i = 0;
    for (sum, n) in blocks {
        let mean = sum / n as f64;
        for _ in 0..n {
            vertices[layer[i]].x = offsets[i] + mean;
            i += 1;
        }
    }
}

/// A coordinate as JSON: an integer when it is one, else one decimal.
fn num(v: f64) -> Value {
    let r = (v * 10.0).round() / 10.0;
    if r.fract() == 0.0 && r.abs() < 1e15 {
        json!(r as i64)
    } else {
        json!(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgraph_compiler::SourceFile;
    use std::path::Path;

    fn compiled(name: &str, text: &str) -> Graph {
        let checked = mcpgraph_compiler::compile(&SourceFile::new(name, text), None);
        match checked.graph {
            Some(graph) => graph,
            None => panic!("{name} does not check: {:#?}", checked.diagnostics),
        }
    }

    fn example(file: &str) -> Graph {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        compiled(file, &text)
    }

    fn view_of(graph: &Graph, tool: &str) -> Value {
        let Some(tool) = graph.tools.iter().find(|t| t.name == tool) else {
            panic!("no tool {tool}");
        };
        let view = tool_view(graph, tool);
        check_geometry(&view);
        view
    }

    struct Rect {
        x: f64,
        y: f64,
        w: f64,
        h: f64,
    }

    fn f(v: &Value) -> f64 {
        v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
    }

    fn rect(node: &Value) -> Rect {
        Rect {
            x: f(&node["x"]),
            y: f(&node["y"]),
            w: f(&node["width"]),
            h: f(&node["height"]),
        }
    }

    fn on_border(p: (f64, f64), r: &Rect) -> bool {
        let inside_outer = p.0 >= r.x - 1.0
            && p.0 <= r.x + r.w + 1.0
            && p.1 >= r.y - 1.0
            && p.1 <= r.y + r.h + 1.0;
        let inside_inner =
            p.0 > r.x + 1.0 && p.0 < r.x + r.w - 1.0 && p.1 > r.y + 1.0 && p.1 < r.y + r.h - 1.0;
        inside_outer && !inside_inner
    }

    fn strictly_inside(p: (f64, f64), r: &Rect) -> bool {
        p.0 > r.x + 1.0 && p.0 < r.x + r.w - 1.0 && p.1 > r.y + 1.0 && p.1 < r.y + r.h - 1.0
    }

    fn points(edge: &Value) -> Vec<(f64, f64)> {
        edge["points"]
            .as_array()
            .map(|ps| ps.iter().map(|p| (f(&p[0]), f(&p[1]))).collect())
            .unwrap_or_default()
    }

    /// Every node has a box inside the drawing, no two boxes overlap, every edge runs from its
    /// source's border to its target's border and through no box's inside.
    fn check_geometry(view: &Value) {
        let name = &view["name"];
        let (width, height) = (f(&view["width"]), f(&view["height"]));
        let nodes = view["nodes"].as_array().expect("nodes");
        let edges = view["edges"].as_array().expect("edges");
        assert!(!nodes.is_empty(), "{name}: no nodes");
        let mut rects = Vec::new();
        for node in nodes {
            let r = rect(node);
            assert!(
                r.w >= MIN_BOX_WIDTH && r.h == BOX_HEIGHT,
                "{name}: box {node}"
            );
            assert!(
                r.x >= 0.0 && r.y >= 0.0 && r.x + r.w <= width && r.y + r.h <= height,
                "{name}: {node} outside {width}x{height}"
            );
            for key in ["id", "type", "label", "detail"] {
                assert!(node[key].is_string(), "{name}: {node} has no {key}");
            }
            rects.push((node["id"].as_str().unwrap_or_default().to_string(), r));
        }
        for (i, (a, ra)) in rects.iter().enumerate() {
            for (b, rb) in &rects[i + 1..] {
                let apart = ra.x + ra.w <= rb.x
                    || rb.x + rb.w <= ra.x
                    || ra.y + ra.h <= rb.y
                    || rb.y + rb.h <= ra.y;
                assert!(apart, "{name}: boxes {a} and {b} overlap");
                assert_ne!(a, b, "{name}: two nodes {a}");
            }
        }
        let find = |id: &Value| {
            rects
                .iter()
                .find(|(n, _)| id.as_str() == Some(n.as_str()))
                .map(|(_, r)| r)
                .unwrap_or_else(|| panic!("{name}: no node {id}"))
        };
        for edge in edges {
            let from = find(&edge["from"]);
            let to = find(&edge["to"]);
            let ps = points(edge);
            assert!(ps.len() >= 2, "{name}: {edge} has fewer than two points");
            assert!(
                on_border(ps[0], from),
                "{name}: {edge} does not start on its source"
            );
            assert!(
                on_border(ps[ps.len() - 1], to),
                "{name}: {edge} does not end on its target"
            );
            for &(x, y) in &ps {
                assert!(
                    x >= 0.0 && x <= width && y >= 0.0 && y <= height,
                    "{name}: {edge}"
                );
            }
            // Sampled every pixel: no point of the polyline is inside a box.
            for pair in ps.windows(2) {
                let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
                let steps = (x1 - x0).abs().max((y1 - y0).abs()).ceil().max(1.0) as usize;
                for s in 0..=steps {
                    let t = s as f64 / steps as f64;
                    let p = (x0 + (x1 - x0) * t, y0 + (y1 - y0) * t);
                    for (id, r) in &rects {
                        assert!(
                            !strictly_inside(p, r),
                            "{name}: {edge} passes through {id} at {p:?}"
                        );
                    }
                }
            }
            for key in ["kind", "label"] {
                assert!(edge[key].is_string(), "{name}: {edge} has no {key}");
            }
        }
    }

    fn edges_between<'a>(view: &'a Value, from: &str, to: &str) -> Vec<&'a Value> {
        view["edges"]
            .as_array()
            .map(|es| {
                es.iter()
                    .filter(|e| e["from"] == from && e["to"] == to)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn node<'a>(view: &'a Value, id: &str) -> &'a Value {
        view["nodes"]
            .as_array()
            .and_then(|ns| ns.iter().find(|n| n["id"] == id))
            .unwrap_or_else(|| panic!("no node {id} in {}", view["name"]))
    }

    #[test]
    fn the_loop_goes_back_around_the_right_side_with_its_rule() {
        let view = view_of(&example("loop.yaml"), "sum_to_n");
        assert_eq!(view["description"], "Sums the numbers from 1 to n");
        assert_eq!(view["inputSchema"]["required"], json!(["n"]));
        assert_eq!(view["outputSchema"]["required"], json!(["sum"]));
        let back = edges_between(&view, "check_condition", "increment_node");
        assert_eq!(back.len(), 1);
        assert_eq!(back[0]["kind"], "rule");
        assert_eq!(
            back[0]["label"],
            "increment_node.counter < increment_node.target"
        );
        let out = edges_between(&view, "check_condition", "exit_transform");
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["kind"], "default");
        assert_eq!(out[0]["label"], "otherwise");
        // Top to bottom, one rank each.
        let ys: Vec<f64> = [
            "entry_sum",
            "increment_node",
            "check_condition",
            "exit_transform",
            "exit_sum",
        ]
        .iter()
        .map(|id| f(&node(&view, id)["y"]))
        .collect();
        assert!(ys.windows(2).all(|w| w[0] < w[1]), "{ys:?}");
        // The back edge's lane is right of both boxes, and it enters its target from above.
        let right = ["check_condition", "increment_node"]
            .iter()
            .map(|id| {
                let r = rect(node(&view, id));
                r.x + r.w
            })
            .fold(0.0, f64::max);
        let ps = points(back[0]);
        assert!(ps.iter().any(|p| p.0 > right), "{ps:?} right of {right}");
        let last = ps[ps.len() - 1];
        let before = ps[ps.len() - 2];
        assert!(before.1 < last.1, "enters from above: {ps:?}");
        assert_eq!(node(&view, "check_condition")["type"], "switch");
        assert_eq!(node(&view, "check_condition")["detail"], "switch");
    }

    #[test]
    fn every_example_is_drawn_without_overlaps() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .expect("examples")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml"))
            .collect();
        files.sort();
        assert!(files.len() >= 5, "{files:?}");
        for file in files {
            let graph = example(&file);
            for tool in &graph.tools {
                let view = view_of(&graph, &tool.name);
                let drawn = view["nodes"].as_array().map_or(0, Vec::len);
                assert!(drawn >= tool.nodes.len(), "{file}: {}", tool.name);
                for n in &tool.nodes {
                    node(&view, &n.id);
                }
            }
        }
    }

    #[test]
    fn error_routes_are_on_error_edges_labelled_with_their_kinds() {
        let view = view_of(&example("flaky_retry.yaml"), "fetch_with_retry");
        let route = edges_between(&view, "fetch", "give_up");
        assert_eq!(route.len(), 1);
        assert_eq!(route[0]["kind"], "onError");
        assert_eq!(route[0]["label"], "tool, timeout");
        assert_eq!(edges_between(&view, "fetch", "done")[0]["kind"], "next");
        assert_eq!(node(&view, "fetch")["detail"], "mock.flaky");
        assert_eq!(node(&view, "fetch")["type"], "mcp");

        let view = view_of(&example("confirm_ask.yaml"), "overwrite_file");
        let route = edges_between(&view, "confirm", "not_asked");
        assert_eq!(route[0]["kind"], "onError");
        assert_eq!(route[0]["label"], "any error");
        let yes = edges_between(&view, "decide", "write");
        assert_eq!(yes[0]["kind"], "rule");
        assert_eq!(yes[0]["label"], "confirm.ok == true");
        // The switch's `next` is its default.
        let no = edges_between(&view, "decide", "kept");
        assert_eq!(no[0]["kind"], "default");
        assert_eq!(no[0]["label"], "otherwise");
        assert_eq!(node(&view, "confirm")["type"], "ask");
        assert_eq!(
            node(&view, "confirm")["detail"],
            "\"Overwrite \" & $.entry.path &…"
        );
    }

    #[test]
    fn parallel_branches_are_pseudo_nodes_between_the_parallel_and_its_next() {
        let view = view_of(&example("parallel_inspect.yaml"), "inspect");
        let look = rect(node(&view, "look"));
        let report = rect(node(&view, "report"));
        for branch in ["info", "listing", "roots"] {
            let id = format!("look/{branch}");
            let pseudo = node(&view, &id);
            assert_eq!(pseudo["type"], "branch");
            assert_eq!(pseudo["label"], branch);
            let r = rect(pseudo);
            assert!(
                look.y < r.y && r.y < report.y,
                "{id} between look and report"
            );
            let to = edges_between(&view, "look", &id);
            assert_eq!(to.len(), 1);
            assert_eq!(to[0]["kind"], "branch");
            assert_eq!(edges_between(&view, &id, "report")[0]["kind"], "branch");
        }
        assert_eq!(
            node(&view, "look/info")["detail"],
            "filesystem.get_file_info"
        );
        assert!(edges_between(&view, "look", "report").is_empty());
        assert_eq!(node(&view, "look")["detail"], "3 branches");
    }

    #[test]
    fn a_map_has_its_call_beside_it() {
        let view = view_of(&example("self_call.yaml"), "corpus_stats");
        let map = node(&view, "each");
        assert_eq!(map["type"], "map");
        assert_eq!(map["detail"], "map items: $.entry.texts");
        let call = node(&view, "each/call");
        assert_eq!(call["type"], "item");
        assert_eq!(call["detail"], "self.word_stats");
        assert_eq!(call["y"], map["y"]);
        let (m, c) = (rect(map), rect(call));
        assert!(m.x + m.w < c.x, "the call is right of the map");
        let item = edges_between(&view, "each", "each/call");
        assert_eq!(item.len(), 1);
        assert_eq!(item[0]["kind"], "item");
        assert_eq!(edges_between(&view, "each", "total")[0]["kind"], "next");
    }

    /// Nested loops, a switch sending two conditions to one node, an edge skipping ranks, an
    /// error route going back up, and a map inside a loop.
    #[test]
    fn a_tangled_graph_keeps_its_boxes_apart() {
        let yaml = r#"
version: "1.0"
server: { name: "tangle", version: "1.0.0" }
tools:
  - name: "tangle"
    description: "d"
    inputSchema: { type: object, properties: { n: { type: number } } }
    nodes:
      - { id: entry, type: entry, next: a }
      - { id: a, type: transform, transform: { expr: '{"i": 1}' }, next: b }
      - { id: b, type: transform, transform: { expr: '{"j": 1}' }, next: s1, onError: a }
      - id: s1
        type: switch
        conditions:
          - { rule: { "<": [{ var: "$.b.j" }, 3] }, target: b }
          - { rule: { ">": [{ var: "$.b.j" }, 9] }, target: c }
          - { rule: { "==": [{ var: "$.b.j" }, 5] }, target: c }
          - target: m
      - id: m
        type: map
        items: "$.entry.list"
        server: self
        tool: leaf
        args: { n: "$item" }
        next: s2
      - id: s2
        type: switch
        conditions:
          - { rule: { "and": [{ "<": [{ var: "$.a.i" }, 3] }, { "!": { var: "$.b.j" } }] }, target: a }
          - target: c
      - { id: c, type: transform, transform: { expr: '{}' }, next: exit }
      - { id: exit, type: exit }
  - name: "leaf"
    description: "d"
    inputSchema: { type: object, properties: { n: { type: number } } }
    nodes:
      - { id: entry, type: entry, next: exit }
      - { id: exit, type: exit }
"#;
        let graph = compiled("tangle.yaml", yaml);
        let view = view_of(&graph, "tangle");
        let to_c = edges_between(&view, "s1", "c");
        assert_eq!(to_c.len(), 2);
        assert_ne!(points(to_c[0]), points(to_c[1]), "two edges, two routes");
        assert_eq!(to_c[0]["label"], "b.j > 9");
        assert_eq!(to_c[1]["label"], "b.j == 5");
        let back = edges_between(&view, "s2", "a");
        assert_eq!(back[0]["label"], "a.i < 3 and not b.j");
        assert_eq!(edges_between(&view, "b", "a")[0]["kind"], "onError");
        let exit = f(&node(&view, "exit")["y"]);
        for n in view["nodes"].as_array().into_iter().flatten() {
            assert!(f(&n["y"]) <= exit, "the exit is in the last rank");
        }
    }

    /// Graphs of up to 60 nodes with jumps forward and back (switch conditions, error routes,
    /// a switch that comes back to itself), drawn from a fixed pseudo-random sequence.
    #[test]
    fn large_graphs_with_many_jumps_keep_their_geometry() {
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % below as u64) as usize
        };
        for size in [2usize, 5, 12, 30, 60] {
            let mut nodes = String::from("      - { id: entry, type: entry, next: n0 }\n");
            for i in 0..size {
                let after = if i + 1 == size {
                    "exit".to_string()
                } else {
                    format!("n{}", i + 1)
                };
                if next(3) == 0 {
                    let jump = next(size);
                    let other = next(size);
                    nodes.push_str(&format!(
                        "      - id: n{i}\n        type: switch\n        conditions:\n\
                         \x20         - {{ rule: {{ \"<\": [{{ var: \"$.entry.n\" }}, {i}] }}, target: n{jump} }}\n\
                         \x20         - {{ rule: {{ \">\": [{{ var: \"$.entry.n\" }}, {i}] }}, target: n{other} }}\n\
                         \x20         - {{ target: {after} }}\n"
                    ));
                } else if next(4) == 0 {
                    // Anywhere but the node itself (E0605).
                    let route = match next(size + 1) {
                        r if r == i || r == size => "exit".to_string(),
                        r => format!("n{r}"),
                    };
                    nodes.push_str(&format!(
                        "      - {{ id: n{i}, type: transform, transform: {{ expr: '{{}}' }}, next: {after}, onError: {route} }}\n"
                    ));
                } else {
                    nodes.push_str(&format!(
                        "      - {{ id: n{i}, type: transform, transform: {{ expr: '{{}}' }}, next: {after} }}\n"
                    ));
                }
            }
            nodes.push_str("      - { id: exit, type: exit }\n");
            let yaml = format!(
                "version: \"1.0\"\nserver: {{ name: \"big\", version: \"1.0.0\" }}\ntools:\n\
                 \x20 - name: \"big\"\n    description: \"d\"\n\
                 \x20   inputSchema: {{ type: object, properties: {{ n: {{ type: number }} }} }}\n\
                 \x20   nodes:\n{nodes}"
            );
            let graph = compiled("big.yaml", &yaml);
            let view = view_of(&graph, "big");
            assert_eq!(
                view["nodes"].as_array().map_or(0, Vec::len),
                size + 2,
                "{yaml}"
            );
        }
    }

    #[test]
    fn rules_read_as_infix() {
        let cases = [
            (
                json!({"<": [{"var": "$.a.counter"}, {"var": "$.a.target"}]}),
                "a.counter < a.target",
            ),
            (json!({"<=": [1, {"var": "x"}, 3]}), "1 <= x <= 3"),
            (json!({">=": [{"var": "x"}, 2]}), "x >= 2"),
            (json!({"===": [{"var": "x"}, "on"]}), "x === \"on\""),
            (json!({"!==": [{"var": "x"}, null]}), "x !== null"),
            (json!({"!=": [{"var": "x"}, false]}), "x != false"),
            (json!({"+": [1, 2, {"var": "n"}]}), "1 + 2 + n"),
            (json!({"*": [{"+": [1, 2]}, 3]}), "(1 + 2) * 3"),
            (
                json!({"-": [{"var": "a"}, {"-": [{"var": "b"}, 1]}]}),
                "a - (b - 1)",
            ),
            (json!({"/": [{"%": [{"var": "a"}, 2]}, 4]}), "a % 2 / 4"),
            (json!({"-": [{"var": "a"}]}), "-a"),
            (
                json!({"and": [{"<": [{"var": "a"}, 1]}, {"or": [{"var": "b"}, {"var": "c"}]}]}),
                "a < 1 and (b or c)",
            ),
            (
                json!({"or": [{"and": [true, false]}, true]}),
                "(true and false) or true",
            ),
            (json!({"!": [{"var": "done"}]}), "not done"),
            (json!({"!": {"==": [{"var": "a"}, 1]}}), "not (a == 1)"),
            (json!({"!!": [{"var": "list"}]}), "bool(list)"),
            (json!({"var": ["x.y", 0]}), "x.y ?? 0"),
            (json!({"var": "$"}), "$"),
            (json!({"in": ["a", {"var": "tags"}]}), "\"a\" in tags"),
            (
                json!({"if": [{"var": "a"}, "yes", {"var": "b"}, "maybe", "no"]}),
                "if a then \"yes\" else if b then \"maybe\" else \"no\"",
            ),
            (
                json!({"==": [{"if": [true, 1, 2]}, 1]}),
                "(if true then 1 else 2) == 1",
            ),
            (json!({"cat": ["a", {"var": "b"}]}), "cat(\"a\", b)"),
            (json!({"in": [1, [1, 2]]}), "1 in [1, 2]"),
            (json!(true), "true"),
            (json!({"a": 1, "b": 2}), "{\"a\":1,\"b\":2}"),
        ];
        for (rule, text) in cases {
            assert_eq!(rule_text(&rule), text, "{rule}");
        }
    }

    #[test]
    fn long_rules_are_cut_to_sixty_characters() {
        let rule = json!({"and": [
            {"<": [{"var": "$.some_long_node_name.counter"}, {"var": "$.other_node.target"}]},
            {"==": [{"var": "$.third_node.status"}, "ready"]}
        ]});
        let text = rule_text(&rule);
        assert_eq!(text.chars().count(), 60);
        assert!(text.ends_with('…'));
        assert!(text.starts_with("some_long_node_name.counter < other_node.target and"));
    }

    #[test]
    fn a_rule_of_the_ir_reads_through_its_json() {
        let graph = example("switch.yaml");
        let tool = &graph.tools[0];
        let texts: Vec<String> = tool
            .nodes
            .iter()
            .flat_map(|n| match &n.kind {
                NodeKind::Switch { conditions } => conditions
                    .iter()
                    .filter_map(|c| c.rule.as_ref().map(|r| rule_text(&r.to_json())))
                    .collect(),
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(texts, ["entry.value > 10", "entry.value > 0"]);
    }
}
