// ns per evaluation of the same cases (src/cases.json) with jsonata-js, as the original
// evaluates them (a pre-compiled expression here, which favours jsonata-js: the original
// re-compiles every expression on every evaluation). Usage: node jsonata-bench.js JSONATA_DIR [ms]
const path = require("path");
const jsonata = require(path.resolve(process.argv[2]));
const budgetMs = Number(process.argv[3] || 1000);
const cases = require("./src/cases.json");

async function main() {
  for (const c of cases) {
    let data = c.data;
    let history = [];
    if (data === "LINES50") data = { s: Array.from({ length: 50 }, (_, i) => `line ${i}: some text here`).join("\n") };
    if (data === "ITEMS1000") data = { items: Array.from({ length: 1000 }, (_, i) => ({ n: i, name: `item ${i}` })) };
    if (data === "HISTORY") {
      history.push({ nodeId: "entry_sum", output: { n: 1000 } });
      for (let i = 1; i <= 100; i++) history.push({ nodeId: "increment_node", output: { counter: i, sum: (i * (i + 1)) / 2, target: 1000 } });
      data = { increment_node: history[history.length - 1].output, entry_sum: history[0].output };
    }
    const expr = jsonata(c.expr);
    // The original's history functions (they scan the history).
    expr.registerFunction("executionCount", (name) => history.filter((h) => h.nodeId === name).length, "<s:n>");
    expr.registerFunction("nodeExecution", (name, k) => {
      const runs = history.filter((h) => h.nodeId === name);
      const i = k < 0 ? runs.length + k : k;
      return i >= 0 && i < runs.length ? runs[i].output : null;
    }, "<s-n:o>");
    await expr.evaluate(data);
    let iterations = 0;
    const start = process.hrtime.bigint();
    let elapsed = 0n;
    while (elapsed < BigInt(budgetMs) * 1000000n) {
      for (let i = 0; i < 16; i++) await expr.evaluate(data);
      iterations += 16;
      elapsed = process.hrtime.bigint() - start;
    }
    console.log(JSON.stringify({ case: c.name, ns: Math.round(Number(elapsed) / iterations), iterations }));
  }
}
main();
