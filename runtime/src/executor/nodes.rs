//! The nodes that evaluate and never wait: exit, transform and switch (the entry's output is
//! the call's arguments, in the loop).

use super::{Run, Step};
use crate::failure::{Failure, FailureKind};
use crate::jsonata::Jsonata;
use crate::jsonlogic::{self, LogicError, Vars};
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{Condition, Expr, Node};

impl Run<'_> {
    /// `exit`: the previous node's output (see [`exit_output`]).
    pub(super) fn exit(&self) -> JValue {
        let last = self
            .history
            .borrow()
            .last()
            .map(|r| r.output.clone())
            .unwrap_or(JValue::Undefined);
        exit_output(last)
    }

    /// `transform`: the expression's value.
    pub(super) fn transform(&self, node: &Node, expr: &Expr) -> Step {
        let context = self.context();
        let value = self.eval(expr, &context)?;
        Ok((value, node.next, None))
    }

    /// `switch`: the first condition that holds (its target's id is the output), else the
    /// default.
    pub(super) fn switch(&self, node: &Node, conditions: &[Condition]) -> Step {
        let context = self.context();
        let mut jsonata = self.jsonata.borrow_mut();
        let mut vars = GraphVars {
            jsonata: &mut jsonata,
            context: &context,
        };
        for condition in conditions {
            let matched = match &condition.rule {
                None => true,
                Some(rule) => {
                    let value = match condition.native {
                        Some(native) => jsonlogic::native(native, vars.jsonata, &context),
                        None => jsonlogic::apply(rule, &context, &mut vars),
                    };
                    let value = value.map_err(|error| {
                        let rule_text =
                            serde_json::to_string_pretty(&rule.to_json()).unwrap_or_default();
                        Failure::new(
                            error.kind(),
                            format!("JSON Logic evaluation failed: {error}\nRule: {rule_text}"),
                        )
                    })?;
                    // The switch converts the final value with JavaScript Boolean(), not JSON
                    // Logic's truthiness: [] and {} are true.
                    crate::js::boolean(&value)
                }
            };
            if matched {
                let target = condition.target;
                return Ok((self.node_name(target), Some(target), None));
            }
        }
        match node.next {
            Some(default) => Ok((self.node_name(default), Some(default), None)),
            None => Err(Failure::new(
                FailureKind::Route,
                format!(
                    "Switch node {}: No conditions matched and no default case provided",
                    node.id
                ),
            )
            .into()),
        }
    }
}

/// The exit's output: the previous output, with falsy values (`0`, `false`, `""`, `null`,
/// undefined) turned into `{}` — the original's `output || {}`.
fn exit_output(last: JValue) -> JValue {
    let falsy = match &last {
        JValue::Undefined | JValue::Null => true,
        JValue::Bool(b) => !b,
        JValue::Number(n) => *n == 0.0 || n.is_nan(),
        JValue::String(s) => s.is_empty(),
        _ => false,
    };
    if falsy {
        JValue::object(Default::default())
    } else {
        last
    }
}

/// JSON Logic's `var`s, which are JSONata in graphs.
struct GraphVars<'a> {
    jsonata: &'a mut Jsonata,
    context: &'a JValue,
}

impl Vars for GraphVars<'_> {
    fn var(&mut self, expr: &Expr) -> Result<JValue, LogicError> {
        Ok(self.jsonata.eval(expr, self.context)?)
    }
}
