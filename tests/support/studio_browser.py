#!/usr/bin/env python3
"""Drives the studio's page in headless Chromium through chromedriver (W3C WebDriver over
urllib, standard library only), as tests/network/studio_browser.rs runs it:

    studio_browser.py STUDIO_URL WEBDRIVER_URL GRAPH_FILE ROOT

STUDIO_URL is the page (`http://127.0.0.1:PORT/`) serving GRAPH_FILE (a copy of
examples/loop.yaml the script may rewrite); WEBDRIVER_URL is chromedriver's
(`http://127.0.0.1:PORT`); ROOT the project (the screenshot goes to ROOT/target/
studio-screenshot.png, and to ROOT/docs/studio.png with MCPGRAPH_BLESS=1).

The page is used through its DOM contract only (docs/studio.md and the ids, classes and data
attributes the tests name): sum_to_n with a breakpoint on check_condition and n = 3, two steps,
the history and one record's context, the breakpoint taken away and a continue to {"sum": 6};
a run from raw JSON started paused and stopped; then a broken save shown with its line flagged
and a fixed one. Last, Chromium's network log:
every request went to the studio. Prints "ok" at the end; on a failure, what the page showed.
"""
import base64
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

# How long anything waited for may take.
DEADLINE = 10.0
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"

# examples/loop.yaml for n = 3, node by node as the engine runs it (entry and exit included).
LOOP_OF_3 = ["entry_sum", "increment_node", "check_condition", "increment_node", "check_condition",
             "increment_node", "check_condition", "exit_transform", "exit_sum"]
TYPES = {"entry_sum": "entry", "increment_node": "transform", "check_condition": "switch",
         "exit_transform": "transform", "exit_sum": "exit"}


class Failure(Exception):
    pass


class WebDriverError(Exception):
    pass


def http(method, url, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json; charset=utf-8"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace")
        try:
            value = json.loads(text)["value"]
            raise WebDriverError(f"{method} {url}: {value.get('error')}: {value.get('message')}")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise WebDriverError(f"{method} {url}: HTTP {e.code}: {text[:500]}")


def wait(what, probe, deadline=DEADLINE):
    """Polls `probe` until it returns something true; fails with `what` after `deadline`."""
    end = time.monotonic() + deadline
    last = None
    while True:
        try:
            last = probe()
        except WebDriverError as e:
            last = e
            if "no such window" in str(e) or "invalid session id" in str(e):
                raise
        else:
            if last:
                return last
        if time.monotonic() > end:
            raise Failure(f"timed out after {deadline} s waiting for {what} (last seen: {last!r})")
        time.sleep(0.05)


def check(condition, message):
    if not condition:
        raise Failure(message)


class Browser:
    def __init__(self, driver, profile):
        self.driver = driver
        wait("chromedriver to be ready",
             lambda: self.ready(), deadline=20)
        capabilities = {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                # The usual headless flags for a browser with no first-run, new-tab or
                # background machinery (those of Puppeteer's defaults that apply here), and a
                # blank start page: the network log then holds the studio's page alone,
                # whichever Chromium is installed.
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                         "--no-first-run", "--no-default-browser-check",
                         "--disable-background-networking", "--disable-component-update",
                         "--disable-default-apps", "--disable-extensions",
                         "--disable-component-extensions-with-background-pages",
                         "--disable-client-side-phishing-detection", "--disable-sync",
                         "--disable-features=Translate,OptimizationHints,MediaRouter,"
                         "NtpRealboxMemoryCache,ChromeWhatsNewUI",
                         "--metrics-recording-only", "--password-store=basic",
                         "--disable-dev-shm-usage", "--window-size=1400,900",
                         f"--user-data-dir={profile}", "about:blank"],
            },
            "goog:loggingPrefs": {"performance": "ALL", "browser": "ALL"},
        }
        value = http("POST", f"{driver}/session",
                     {"capabilities": {"alwaysMatch": capabilities}}, timeout=60)["value"]
        self.session = value["sessionId"]

    def ready(self):
        try:
            return http("GET", f"{self.driver}/status", timeout=2)["value"].get("ready")
        except (OSError, WebDriverError):
            return False

    def call(self, method, path, body=None):
        if method == "POST" and body is None:
            body = {}
        return http(method, f"{self.driver}/session/{self.session}{path}", body)["value"]

    def quit(self):
        try:
            http("DELETE", f"{self.driver}/session/{self.session}", timeout=20)
        except (OSError, WebDriverError) as e:
            print(f"closing the session: {e}", file=sys.stderr)

    def go(self, url):
        self.call("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def element(self, css):
        """The element `css` selects, once there is one."""
        def find():
            try:
                return self.call("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]
            except WebDriverError as e:
                if "no such element" in str(e):
                    return None
                raise
        return wait(f"an element {css}", find)

    def click(self, css):
        self.call("POST", f"/element/{self.element(css)}/click")

    def type_into(self, css, text):
        element = self.element(css)
        self.call("POST", f"/element/{element}/clear")
        self.call("POST", f"/element/{element}/value", {"text": text})

    def attribute(self, css, name):
        return self.js("const e = document.querySelector(arguments[0]);"
                       "return e ? e.getAttribute(arguments[1]) : null;", css, name)

    def has_class(self, css, name):
        return self.js("const e = document.querySelector(arguments[0]);"
                       "return !!e && e.classList.contains(arguments[1]);", css, name)

    def text(self, css):
        return self.js("const e = document.querySelector(arguments[0]);"
                       "return e ? e.textContent : null;", css)

    def count(self, css):
        return self.js("return document.querySelectorAll(arguments[0]).length;", css)

    def screenshot(self, path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.call("GET", "/screenshot")))

    def log(self, kind):
        return self.call("POST", "/se/log", {"type": kind})

    def page_report(self):
        """What the page shows, for a failure message."""
        try:
            return self.js(
                "const s = document.querySelector('#status');"
                "const r = document.querySelector('#run-state');"
                "const text = document.body ? document.body.innerText : '';"
                "return 'url: ' + location.href"
                " + '\\n#status: ' + (s ? s.textContent.trim() : '(none)')"
                " + '\\n#run-state: ' + (r ? 'data-state=' + r.getAttribute('data-state')"
                "    + ' data-paused-at=' + r.getAttribute('data-paused-at')"
                "    + ' text=' + r.textContent.trim() : '(none)')"
                " + '\\nbody text (tail):\\n' + text.slice(-2000);")
        except (OSError, WebDriverError) as e:
            return f"(the page could not be read: {e})"


def node(name):
    return f'svg#graph g.node[data-node="{name}"]'


def node_states(browser):
    return browser.js(
        "const out = {};"
        "for (const g of document.querySelectorAll('svg#graph g.node'))"
        "  out[g.getAttribute('data-node')] = g.getAttribute('data-state');"
        "return out;")


def wait_paused_at(browser, name):
    def paused():
        state = browser.attribute("#run-state", "data-state")
        at = browser.attribute("#run-state", "data-paused-at")
        return state == "paused" and at == name
    wait(f"#run-state data-state=paused data-paused-at={name}", paused)


def expect_states(browser, expected, when):
    states = node_states(browser)
    for name, state in expected.items():
        check(states.get(name) == state,
              f"{when}: node {name} has data-state={states.get(name)!r}, not {state!r} (all: {states})")


def history(browser):
    return browser.js(
        "return [...document.querySelectorAll('table#history tr.record')].map(r => ({"
        "  index: r.getAttribute('data-index'), node: r.getAttribute('data-node'),"
        "  cells: [...r.querySelectorAll('td')].map(c => c.textContent.trim())}));")


def wait_history(browser, count):
    return wait(f"{count} rows tr.record in table#history",
                lambda: (lambda rows: rows if len(rows) == count else None)(history(browser)))


def check_history(rows, nodes):
    check([r["node"] for r in rows] == nodes,
          f"history rows' data-node {[r['node'] for r in rows]}, not {nodes}")
    for i, row in enumerate(rows):
        check(row["index"] == str(i), f"row {i} has data-index={row['index']!r}")
        cells = row["cells"]
        check(len(cells) == 8, f"row {i} has {len(cells)} cells, not 8 (index, node, type, start, "
                               f"duration, attempts, output, failure kind): {cells}")
        check(cells[0] == str(i) and cells[1] == row["node"] and cells[2] == TYPES[row["node"]],
              f"row {i}'s index, node and type cells: {cells[:3]}")


def result_is(browser, expected):
    if browser.attribute("#result", "data-state") != "done":
        return False
    text = browser.text("#result pre") or ""
    try:
        return json.loads(text) == expected
    except ValueError:
        return False


def requests_made(browser):
    """The URLs of the requests (and WebSocket connections) in the network log since it was
    last read; read until it is empty, in case chromedriver returns it in parts."""
    urls = []
    while True:
        entries = browser.log("performance")
        if not entries:
            return urls
        for entry in entries:
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                urls.append(message["params"]["request"]["url"])
            elif message.get("method") == "Network.webSocketCreated":
                urls.append(message["params"]["url"])


# Schemes of the browser's own pages and of data it already holds: loading one reaches no host.
INTERNAL_SCHEMES = {"about", "blob", "data", "javascript", "chrome", "chrome-untrusted",
                    "chrome-extension", "chrome-search", "chrome-error", "devtools", "view-source"}


def is_network(url):
    """Whether loading `url` is a network request: its scheme reaches a host (http, https, ws,
    wss, or any scheme not in INTERNAL_SCHEMES: an unknown one counts, to be safe)."""
    return urllib.parse.urlsplit(url).scheme.lower() not in INTERNAL_SCHEMES


def is_studio(url, base):
    """Whether `url` is http or ws to exactly the studio's host and port (`base` is its page)."""
    studio = urllib.parse.urlsplit(base)
    try:
        parts = urllib.parse.urlsplit(url)
        return (parts.scheme.lower() in ("http", "ws") and parts.hostname == studio.hostname
                and parts.port == studio.port)
    except ValueError:
        return False


def outside(urls, base):
    """The network requests among `urls` to anything but the studio. The browser's internal pages
    (chrome://, chrome-untrusted://, ...) and data: URLs are not network requests."""
    return [u for u in urls if is_network(u) and not is_studio(u, base)]


def tour(browser, url, graph_file, root):
    browser.go(url)
    browser.element('#tools button.tool[data-tool="sum_to_n"]')
    browser.click('#tools button.tool[data-tool="sum_to_n"]')
    wait("the tool button to be selected",
         lambda: browser.has_class('#tools button.tool[data-tool="sum_to_n"]', "selected"))
    browser.element(node("check_condition"))

    # The drawing: the five nodes with their types, the edges with their kinds, the rule.
    types = browser.js(
        "const out = {};"
        "for (const g of document.querySelectorAll('svg#graph g.node'))"
        "  out[g.getAttribute('data-node')] = g.getAttribute('data-type');"
        "return out;")
    check(types == TYPES, f"the nodes drawn and their data-type: {types}")
    edges = browser.js(
        "return [...document.querySelectorAll('svg#graph path.edge')].map(e =>"
        "  [e.getAttribute('data-from'), e.getAttribute('data-to'), e.getAttribute('data-kind')]);")
    expected_edges = [["check_condition", "exit_transform", "default"],
                      ["check_condition", "increment_node", "rule"],
                      ["entry_sum", "increment_node", "next"],
                      ["exit_transform", "exit_sum", "next"],
                      ["increment_node", "check_condition", "next"]]
    check(sorted(edges) == expected_edges, f"the edges drawn: {sorted(edges)}")
    labels = browser.js("return [...document.querySelectorAll('svg#graph text.edge-label')]"
                        ".map(t => t.textContent.trim());")
    check("increment_node.counter < increment_node.target" in labels, f"edge labels: {labels}")

    # A breakpoint on check_condition, only there.
    browser.click(node("check_condition"))
    wait("data-breakpoint=true on check_condition",
         lambda: browser.attribute(node("check_condition"), "data-breakpoint") == "true")
    others = browser.count('svg#graph g.node[data-breakpoint]:not([data-node="check_condition"])')
    check(others == 0, f"{others} other nodes have data-breakpoint")

    browser.type_into('form#input-form [name="n"]', "3")
    browser.click("#run")
    wait_paused_at(browser, "check_condition")
    expect_states(browser, {"entry_sum": "done", "increment_node": "done",
                            "check_condition": "paused", "exit_transform": "pending",
                            "exit_sum": "pending"}, "at the breakpoint")
    check_history(wait_history(browser, 2), LOOP_OF_3[:2])

    # Step: check_condition runs, the loop goes back: the run waits before increment_node.
    browser.click("#step")
    wait_paused_at(browser, "increment_node")
    expect_states(browser, {"check_condition": "done", "increment_node": "paused"},
                  "after the first step")
    # Step: increment_node runs; the run waits before check_condition again.
    browser.click("#step")
    wait_paused_at(browser, "check_condition")
    expect_states(browser, {"increment_node": "done", "check_condition": "paused"},
                  "after the second step")
    rows = wait_history(browser, 4)
    check_history(rows, LOOP_OF_3[:4])
    check("counter" in rows[1]["cells"][6], f"increment_node's output cell: {rows[1]['cells']}")

    # Time travel: the first check saw increment_node's first output.
    browser.click('table#history tr.record[data-index="2"]')
    detail = 'table#history tr.record-detail[data-index="2"]'
    context = wait(f"{detail} pre.context naming increment_node",
                   lambda: (lambda t: t if t and "increment_node" in t else None)(
                       browser.text(f"{detail} pre.context")))
    check('"counter"' in context, f"the context shown: {context}")
    output = browser.text(f"{detail} pre.output") or ""
    check("increment_node" in output, f"check_condition's output shown: {output!r}")
    wait("check_condition highlighted", lambda: browser.has_class(node("check_condition"), "highlight"))

    browser.screenshot(os.path.join(root, "target", "studio-screenshot.png"))
    if os.environ.get("MCPGRAPH_BLESS") == "1":
        browser.screenshot(os.path.join(root, "docs", "studio.png"))

    # Without the breakpoint (taken away during the run), continue runs to the end.
    browser.click(node("check_condition"))
    wait("no data-breakpoint on check_condition",
         lambda: browser.attribute(node("check_condition"), "data-breakpoint") is None)
    browser.click("#continue")
    wait('#result data-state=done with {"sum": 6} (a pause instead means the page did not send '
         'the breakpoint taken away to the run)', lambda: result_is(browser, {"sum": 6}))
    wait("#run-state data-state=done", lambda: browser.attribute("#run-state", "data-state") == "done")
    check_history(wait_history(browser, 9), LOOP_OF_3)
    expect_states(browser, {name: "done" for name in TYPES}, "at the end")

    # The arguments as raw JSON, a run started paused (before the entry), then stopped.
    browser.click("#raw-toggle")
    wait("#raw-json holding the form's arguments", lambda: raw_arguments(browser) == {"n": 3})
    browser.type_into("#raw-json", '{"n": 2}')
    wait("#raw-json holding the new arguments", lambda: raw_arguments(browser) == {"n": 2})
    browser.click("#start-paused")
    check(browser.js("return document.querySelector('#start-paused').checked;"),
          "#start-paused is not checked after a click")
    browser.click("#run")
    wait_paused_at(browser, "entry_sum")
    expect_states(browser, {"entry_sum": "paused", "increment_node": "pending"},
                  "a run started paused")
    browser.click("#stop")
    wait("#result data-state=stopped", lambda: browser.attribute("#result", "data-state") == "stopped")
    wait("#run-state data-state=stopped",
         lambda: browser.attribute("#run-state", "data-state") == "stopped")

    # A save that does not check: its diagnostic and its line flagged in the source.
    good = open(graph_file, encoding="utf-8").read()
    broken = good.replace("next: exit_sum\n", "next: exit_sumx\n")
    check(broken != good, "the graph file has `next: exit_sum`")
    line = broken[:broken.index("exit_sumx")].count("\n") + 1
    save(graph_file, broken)
    wait(f'#diagnostics li.diagnostic[data-line="{line}"]',
         lambda: browser.count(f'#diagnostics li.diagnostic[data-line="{line}"]') == 1)
    shown = browser.text(f'#diagnostics li.diagnostic[data-line="{line}"]') or ""
    check("exit_sumx" in shown, f"the diagnostic shown: {shown!r}")
    wait(f'#source li[data-line="{line}"] flagged',
         lambda: browser.has_class(f'#source li[data-line="{line}"]', "flagged"))
    flagged = browser.js("return [...document.querySelectorAll('#source li.flagged')]"
                         ".map(l => l.getAttribute('data-line'));")
    check(flagged == [str(line)], f"flagged source lines: {flagged}")
    save(graph_file, good)
    wait("the fixed version's tool and no diagnostic",
         lambda: browser.count('#tools button.tool[data-tool="sum_to_n"]') == 1
         and browser.count("#diagnostics li.diagnostic") == 0)


def raw_arguments(browser):
    try:
        return json.loads(browser.js("return document.querySelector('#raw-json').value;"))
    except ValueError:
        return None


def save(path, text):
    """Saves the way editors do: a new file renamed over the old one."""
    temp = path + ".saving"
    with open(temp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temp, path)


def check_logs(browser, url):
    """Every request the page made went to the studio; no script error, no policy violation."""
    base = url if url.endswith("/") else url + "/"
    logged = requests_made(browser)
    check(base in logged, f"the page's own request is not in the network log: {logged}")
    # The filter itself catches what it must, both ways (a check that could not fail proves
    # nothing): foreign network requests count, the studio's own and the browser's pages do not.
    port_prefix = base.rstrip("/")
    own = [base + "api/graph", "ws" + base[len("http"):] + "api/events", "data:image/png;base64,",
           "about:blank", "chrome://new-tab-page/lazy_load.js",
           "chrome-untrusted://new-tab-page/one-google-bar?paramsencoded=",
           "chrome://resources/cr_elements/cr_chip/cr_chip.css.js", "devtools://devtools/x"]
    foreign = ["http://localhost" + base[len("http://127.0.0.1"):], port_prefix + ".evil.example/",
               "https://cdn.example/x.js", "https://127.0.0.1" + base[len("http://127.0.0.1"):],
               "wss://push.example/socket", "ftp://files.example/f", "gopher://old.example/"]
    check(outside(own, base) == [], f"the network filter counts these: {outside(own, base)}")
    check(outside(foreign, base) == foreign,
          f"the network filter lets through: {[u for u in foreign if u not in outside(foreign, base)]}")
    # The browser started on a blank page: the studio's page is the first network request.
    network = [u for u in logged if is_network(u)]
    check(network and network[0] == base,
          f"the first network request is not the studio's page: {network[:5]}")
    internal = len(logged) - len(network)
    print(f"{internal} requests of the browser's own pages (not network requests)", file=sys.stderr)
    elsewhere = outside(logged, base)
    check(not elsewhere, f"requests that left the studio: {elsewhere}")
    problems = []
    for entry in browser.log("browser"):
        text = entry.get("message", "")
        print(f"browser log: {entry.get('level')} {entry.get('source')}: {text}", file=sys.stderr)
        if entry.get("level") == "SEVERE" and (entry.get("source") == "javascript"
                                               or re.search(r"Content Security Policy|Refused to", text)):
            problems.append(text)
    check(not problems, f"script errors or policy violations in the console: {problems}")
    print(f"{len(network)} network requests, all to {base}", file=sys.stderr)


def main():
    url, driver, graph_file, root = sys.argv[1:5]
    profile = tempfile.mkdtemp(prefix="mcpgraph-studio-chromium-")
    browser = None
    try:
        browser = Browser(driver, profile)
        tour(browser, url, graph_file, root)
        check_logs(browser, url)
        print("ok")
        return 0
    except (Failure, WebDriverError, OSError, KeyError, ValueError) as e:
        print(f"FAILED: {e}", file=sys.stderr)
        if browser is not None:
            print(browser.page_report(), file=sys.stderr)
            try:
                browser.screenshot(os.path.join(root, "target", "studio-failure.png"))
                print("screenshot: target/studio-failure.png", file=sys.stderr)
            except (OSError, WebDriverError):
                pass
        return 1
    finally:
        if browser is not None:
            browser.quit()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
