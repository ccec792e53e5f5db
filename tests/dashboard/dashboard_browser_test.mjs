// Browser test of GET /dashboard: Debian's headless Chromium loads the page from a real
// `tide serve` under load, and the numbers it renders are checked against /metrics scrapes taken
// around the page's own polls; a screenshot is saved.
//
// Run: node --experimental-websocket tests/dashboard/dashboard_browser_test.mjs
// (CTest: tide_dashboard_browser_test, label browser). Needs no npm package: it drives Chromium
// over the DevTools protocol with Node's WebSocket.
//
// Environment: TIDE_BINARY_DIR (default ./build), TIDE_SOURCE_DIR (default .), TIDE_MODEL_REPOSITORY
// (default $TIDE_SOURCE_DIR/models, made by `make models`), TIDE_CHROMIUM (default /usr/bin/chromium),
// TIDE_DASHBOARD_SCREENSHOT (default $TIDE_BINARY_DIR/tests/dashboard/dashboard.png).
// Exit 77 (CTest: skipped) when Chromium or the models are missing.
//
// How the numbers are checked. The page runs with ?manual=1 and the test drives its polls:
//   scrape S_a, page poll P1, 3 s of load, page poll P2, scrape S_b.
// 1. P1 and P2 (the raw texts the page fetched) are real successive /metrics scrapes: every counter
//    and histogram bucket satisfies S_a <= P1 <= P2 <= S_b, and the page's window lies inside the
//    test's wall-clock window.
// 2. Every rendered value equals the value this test computes independently (its own parser and
//    histogram_quantile) from P1, P2 and the page's window length, within the display rounding
//    (3 significant digits: at most 0.5 % relative; 0.6 % allowed).
// 3. The page's counts agree with the test's own bracket S_a..S_b: that window holds the page's
//    plus two scrape round trips and a DevTools call (tens of ms), in which each closed-loop client
//    completes at most 1 + gap / P50 requests per edge: that is the allowed excess.
// 4. Gauges (queue depth, busy ratio, breaker, rollout state and agreement) are P2's values; the
//    cache hit ratio is the window's hits / (hits + misses) per model and version, from P1 and P2.
// 5. The rollout's role and window stats are those of the GET /v2/models/{m}/rollout the page
//    fetched with P2, which lies between the test's own GETs taken with S_a and S_b.
// The server runs with the score cache on (half of each request's documents repeat) and a canary
// rollout of minilm-breaker (versions 1 and 2), so every tile shows a live value.
import {spawn} from "node:child_process";
import {createInterface} from "node:readline";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const SKIP = 77;
const CLIENTS = 2;  // closed-loop clients per model
const TEXTS = 8;    // documents per request
const sourceDir = path.resolve(process.env.TIDE_SOURCE_DIR || ".");
const binaryDir = path.resolve(process.env.TIDE_BINARY_DIR || "build");
const repository = path.resolve(process.env.TIDE_MODEL_REPOSITORY || path.join(sourceDir, "models"));
const chromiumPath = process.env.TIDE_CHROMIUM || "/usr/bin/chromium";
const screenshotPath = path.resolve(process.env.TIDE_DASHBOARD_SCREENSHOT ||
                                    path.join(binaryDir, "tests", "dashboard", "dashboard.png"));
const sleep = ms => new Promise(r => setTimeout(r, ms));
let failures = 0;
const children = [];

function check(ok, what) {
  if (ok) {
    console.log("ok   " + what);
  } else {
    failures++;
    console.log("FAIL " + what);
  }
}

function cleanup() {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGTERM");
}
process.on("exit", cleanup);

if (typeof WebSocket !== "function") {
  console.log("SKIP: this Node has no WebSocket (run with node --experimental-websocket, Node >= 20.10)");
  process.exit(SKIP);
}
if (!fs.existsSync(chromiumPath)) {
  console.log(`SKIP: ${chromiumPath} not found (apt-get install chromium, or set TIDE_CHROMIUM)`);
  process.exit(SKIP);
}
if (!fs.existsSync(repository) || fs.readdirSync(repository).length === 0) {
  console.log(`SKIP: no model repository at ${repository} (run make models)`);
  process.exit(SKIP);
}

// ---- the server -------------------------------------------------------------------------------
// A repository with every model of `repository` (linked) plus, when it holds minilm-l6, a second
// model "minilm-breaker" on the same files with a circuit breaker and two versions, so that the
// page shows two models, a breaker state and a rollout (version 2 a canary of version 1).
function makeRepository() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tide-dashboard-repo-"));
  for (const name of fs.readdirSync(repository)) fs.symlinkSync(path.join(repository, name), path.join(dir, name));
  const base = path.join(repository, "minilm-l6");
  if (fs.existsSync(path.join(base, "config.pbtxt"))) {
    const m = path.join(dir, "minilm-breaker");
    for (const version of ["1", "2"]) {
      fs.mkdirSync(path.join(m, version), {recursive: true});
      fs.symlinkSync(path.join(base, "1", "model.onnx"), path.join(m, version, "model.onnx"));
    }
    fs.symlinkSync(path.join(base, "tokenizer.json"), path.join(m, "tokenizer.json"));
    const config = fs.readFileSync(path.join(base, "config.pbtxt"), "utf8").replace(/name: "minilm-l6"/, 'name: "minilm-breaker"') +
        'version_policy { all { } }\n' +
        'parameters {\n  key: "breaker_error_rate"\n  value { string_value: "0.5" }\n}\n';
    fs.writeFileSync(path.join(m, "config.pbtxt"), config);
  }
  return dir;
}

async function startServer(repo) {
  const child = spawn(path.join(binaryDir, "tide"),
                      ["serve", "--model-repository", repo, "--host", "127.0.0.1", "--port", "0",
                       "--score-cache-bytes", String(16 << 20)],
                      {stdio: ["ignore", "pipe", "inherit"]});
  children.push(child);
  const lines = createInterface({input: child.stdout});
  const url = await new Promise((resolve, reject) => {
    // Generous: under `ctest -j2` the two models warm up beside the export round trip on 2 cores.
    const timer = setTimeout(() => reject(new Error("tide serve did not start in 300 s")), 300000);
    child.on("exit", code => reject(new Error("tide serve exited " + code)));
    lines.on("line", line => {
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
  });
  lines.on("line", () => {});  // keep draining stdout
  return url;
}

// ---- load: closed-loop clients posting /rerank --------------------------------------------------
// Cohere-style /v1/rerank, `clients` per model. Half of each request's documents are the same in
// every request (score-cache hits after the first), half are new (misses: the model scores them).
function startLoad(base, models, clients, texts) {
  const load = {running: true, ok: 0, failed: 0};
  const workers = models.flatMap(model => Array.from({length: clients}, () => model));
  let serial = 0;
  load.done = Promise.all(workers.map(async model => {
    while (load.running) {
      const n = serial++;
      const documents = Array.from({length: texts}, (_, i) => i < texts / 2
          ? `The giant panda is a bear native to China, document ${i}.`
          : `The giant panda is a bear native to China, document ${i} of request ${n}.`);
      const body = JSON.stringify({model, query: "what is a panda?", documents});
      try {
        const r = await fetch(base + "/v1/rerank", {method: "POST", headers: {"Content-Type": "application/json"}, body});
        await r.arrayBuffer();
        if (r.ok) load.ok++; else load.failed++;
      } catch {
        load.failed++;
      }
    }
  }));
  return load;
}

// ---- an independent Prometheus text parser and histogram_quantile -------------------------------
function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error("unparsable metrics line: " + line);
    const labels = {};
    for (const lm of (m[2] || "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[lm[1]] = lm[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    samples.push({name: m[1], labels, value: m[3] === "+Inf" ? Infinity : Number(m[3]), id: line.slice(0, line.lastIndexOf(" "))});
  }
  return samples;
}

const of = (samples, name, model, version, filter = () => true) =>
    samples.filter(s => s.name === name && s.labels.model === model && s.labels.version === version && filter(s.labels));
const total = (...args) => of(...args).reduce((a, s) => a + s.value, 0);

function histogramQuantile(q, cur, prev, name, model, version) {
  const les = new Map();
  for (const s of of(cur, name + "_bucket", model, version)) les.set(s.labels.le, (les.get(s.labels.le) || 0) + s.value);
  for (const s of of(prev, name + "_bucket", model, version)) les.set(s.labels.le, (les.get(s.labels.le) || 0) - s.value);
  const b = [...les.entries()].map(([le, c]) => [le === "+Inf" ? Infinity : Number(le), c]).sort((x, y) => x[0] - y[0]);
  const n = b.length ? b[b.length - 1][1] : 0;
  if (n <= 0) return null;
  const rank = q * n;
  const i = b.findIndex(([, c]) => c >= rank);
  if (b[i][0] === Infinity) return b[i - 1][0];
  const [lo, below] = i === 0 ? [0, 0] : b[i - 1];
  return lo + (b[i][0] - lo) * (rank - below) / (b[i][1] - below);
}

function near(shown, expected, what) {
  const x = Number(shown);
  const ok = expected === null ? shown === "–"
      : Number.isFinite(x) && Math.abs(x - expected) <= 0.006 * Math.abs(expected) + 1e-9;
  check(ok, `${what}: shown ${shown}, computed from the page's scrapes ${expected}`);
}

// ---- Chromium over the DevTools protocol --------------------------------------------------------
async function startChromium() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "tide-dashboard-chromium-"));
  const child = spawn(chromiumPath, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                     "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
                                     "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
                                     `--user-data-dir=${profile}`, "--window-size=1400,1500", "about:blank"],
                      {stdio: ["ignore", "ignore", "pipe"]});
  children.push(child);
  let stderr = "";
  child.stderr.on("data", d => { stderr += d; });
  const portFile = path.join(profile, "DevToolsActivePort");
  for (let i = 0; i < 300 && !fs.existsSync(portFile); i++) await sleep(100);
  if (!fs.existsSync(portFile)) throw new Error("chromium did not open its DevTools port:\n" + stderr);
  await sleep(100);
  const port = fs.readFileSync(portFile, "utf8").split("\n")[0];
  const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
  const page = targets.find(t => t.type === "page");
  const ws = new WebSocket(page.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  let next = 0;
  const pending = new Map(), waiters = [];
  ws.onmessage = ev => {
    const msg = JSON.parse(ev.data);
    if (msg.id !== undefined && pending.has(msg.id)) {
      const {resolve, reject} = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) reject(new Error(JSON.stringify(msg.error))); else resolve(msg.result);
    } else if (msg.method) {
      for (const w of waiters.splice(0)) if (w.method === msg.method) w.resolve(msg.params); else waiters.push(w);
    }
  };
  const send = (method, params = {}) => new Promise((resolve, reject) => {
    const id = ++next;
    pending.set(id, {resolve, reject});
    ws.send(JSON.stringify({id, method, params}));
  });
  const once = method => new Promise(resolve => waiters.push({method, resolve}));
  const evaluate = async expression => {
    const r = await send("Runtime.evaluate", {expression, awaitPromise: true, returnByValue: true});
    if (r.exceptionDetails) throw new Error("page exception: " + JSON.stringify(r.exceptionDetails));
    return r.result.value;
  };
  const close = async () => {
    ws.close();
    const exited = new Promise(resolve => child.once("exit", resolve));
    child.kill("SIGTERM");
    await exited;
    // Chromium's helper processes may still be writing the profile for a moment after it exits.
    try {
      fs.rmSync(profile, {recursive: true, force: true, maxRetries: 10, retryDelay: 200});
    } catch (e) {
      console.log(`note: could not remove ${profile}: ${e.message}`);
    }
  };
  return {send, once, evaluate, close};
}

async function waitFor(evaluate, expression, what, timeoutMs = 20000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await evaluate(expression)) return;
    await sleep(100);
  }
  throw new Error("timed out waiting for " + what);
}

// ---- the test -----------------------------------------------------------------------------------
async function main() {
  const started = Date.now();
  const repo = makeRepository();
  process.on("exit", () => fs.rmSync(repo, {recursive: true, force: true}));
  const base = await startServer(repo);
  console.log("server at " + base);
  const index = await (await fetch(base + "/metrics")).text();
  const models = [...new Set([...index.matchAll(/^tide_model_ready\{model="([^"]+)"/gm)].map(m => m[1]))].sort();
  console.log("models: " + models.join(", "));
  const scrape = async () => (await fetch(base + "/metrics")).text();
  // A canary of version 2 beside version 1; a guard that never trips (both are the same weights,
  // but a P99 ratio on a loaded machine could roll back) and a window wider than the run.
  const ROLLOUT_MODEL = "minilm-breaker";
  const hasRollout = models.includes(ROLLOUT_MODEL);
  const getRollout = async () => (await fetch(`${base}/v2/models/${ROLLOUT_MODEL}/rollout`)).json();
  if (hasRollout) {
    const r = await fetch(`${base}/v2/models/${ROLLOUT_MODEL}/rollout`, {method: "PUT", body: JSON.stringify(
        {stable: "1", candidate: "2", mode: "canary", percent: 50, window: 100000, guard: {min_requests: 1000000}})});
    check(r.status === 200, `PUT ${ROLLOUT_MODEL}'s rollout (canary 50%): HTTP ${r.status}`);
  }

  const page = await (await fetch(base + "/dashboard")).text();
  check(page.startsWith("<!DOCTYPE html>"), "GET /dashboard answers the page");

  const load = startLoad(base, models, CLIENTS, TEXTS);
  const browser = await startChromium();
  try {
    await browser.send("Page.enable");
    await browser.send("Runtime.enable");
    const loaded = browser.once("Page.loadEventFired");
    await browser.send("Page.navigate", {url: base + "/dashboard?manual=1"});
    await loaded;
    await waitFor(browser.evaluate, "window.tideDashboard && window.tideDashboard.state.polls >= 1", "the first poll");
    while (load.ok < 4 * models.length) await sleep(50);  // traffic flowing before the measured window
    for (let i = 0; i < 6; i++) {  // some history for the sparklines of the screenshot
      await browser.evaluate("tideDashboard.pollNow().then(() => true)");
      await sleep(500);
    }

    const ta = performance.now();
    const ra = hasRollout ? await getRollout() : null;
    const sa = await scrape();
    await browser.evaluate("tideDashboard.pollNow().then(() => true)");
    await sleep(3000);
    await browser.evaluate("tideDashboard.pollNow().then(() => true)");
    const sb = await scrape();
    const rb = hasRollout ? await getRollout() : null;
    const tb = performance.now();

    const got = await browser.evaluate(`(() => {
      const st = tideDashboard.state;
      const cards = [...document.querySelectorAll("[data-model]")].map(c => {
        const shown = {};
        for (const e of c.querySelectorAll("[data-k]")) shown[e.dataset.k] = e.textContent;
        return {model: c.dataset.model, version: c.dataset.version, shown};
      });
      const server = {};
      for (const e of document.querySelectorAll("#server [data-k]")) server[e.dataset.k] = e.textContent;
      return {server, prevText: st.prevText, lastText: st.lastText, windowSeconds: st.windowSeconds, error: st.error,
              polls: st.polls, cards, rollouts: st.rollouts, status: document.getElementById("status").textContent};
    })()`);
    console.log("page status line: " + got.status);
    check(got.error === null, "the page's polls succeeded");
    const shownModels = [...new Set(got.cards.map(c => c.model))].sort();
    check(shownModels.join() === models.join(), `the page shows a card per model: ${shownModels.join(", ")}`);

    // 1. The page's scrapes are real successive /metrics scrapes inside the test's bracket.
    const [SA, P1, P2, SB] = [sa, got.prevText, got.lastText, sb].map(parseMetrics);
    const byId = samples => new Map(samples.map(s => [s.id, s.value]));
    const [iA, i1, i2, iB] = [SA, P1, P2, SB].map(byId);
    let bracketed = 0, outside = [];
    for (const s of P2) {
      const monotonic = /_total$|_bucket$|_sum$|_count$/.test(s.name);
      if (!monotonic || !iA.has(s.id)) continue;
      const chain = [iA.get(s.id), i1.get(s.id) ?? 0, i2.get(s.id), iB.get(s.id)];
      if (!(chain[0] <= chain[1] && chain[1] <= chain[2] && chain[2] <= chain[3])) outside.push(s.id + " " + chain.join(" <= "));
      bracketed++;
    }
    check(outside.length === 0 && bracketed > 20,
          `${bracketed} counters satisfy S_a <= P1 <= P2 <= S_b` + (outside.length ? ": " + outside.slice(0, 5).join("; ") : ""));
    const dt = got.windowSeconds, wall = (tb - ta) / 1000;
    check(dt >= 3.0 && dt <= wall, `page window ${dt.toFixed(3)} s within [3, test window ${wall.toFixed(3)} s]`);

    // Server-wide gauges (families without a model label): P2's values.
    const whole = name => P2.filter(s => s.name === name).reduce((a, s) => a + s.value, 0);
    const present = name => P2.some(s => s.name === name);
    if (present("tide_tokenization_queue")) near(got.server.tokenization_queue, whole("tide_tokenization_queue"), "tokenization queue");
    if (present("tide_inflight_request_bytes")) {
      near(got.server.inflight_mib, whole("tide_inflight_request_bytes") / 1048576, "in-flight request MiB");
    }
    check(present("tide_score_cache_bytes"), "the score cache is on (tide_score_cache_bytes exported)");
    near(got.server.score_cache_mib, whole("tide_score_cache_bytes") / 1048576, "score cache MiB");
    for (const {model, version, shown} of got.cards) {
      const tag = `${model}/${version}`;
      const r = (name, filter) => (total(P2, name, model, version, filter) - total(P1, name, model, version, filter)) / dt;
      // 2. Rendered values = independent computation from the page's own scrapes.
      const rps = r("tide_requests_total"), pps = r("tide_batch_size_sum");
      near(shown.requests_per_s, rps, `${tag} requests/s`);
      near(shown.pairs_per_s, pps, `${tag} pairs/s`);
      for (const [k, q] of [["p50_ms", 0.5], ["p95_ms", 0.95], ["p99_ms", 0.99]]) {
        const v = histogramQuantile(q, P2, P1, "tide_request_duration_seconds", model, version);
        near(shown[k], v === null ? null : v * 1000, `${tag} ${k}`);
      }
      near(shown.queue_tasks, total(P2, "tide_queue_tasks", model, version), `${tag} queue depth`);
      const busy = of(P2, "tide_instance_busy_ratio", model, version);
      near(shown.busy_mean, busy.reduce((a, s) => a + s.value, 0) / busy.length * 100, `${tag} mean busy %`);
      near(shown.padding_ratio, total(P2, "tide_padding_ratio", model, version), `${tag} padding ratio`);
      // No tide_breaker_state series (no breaker configured): "n/a".
      const breakerSeries = of(P2, "tide_breaker_state", model, version);
      const breaker = breakerSeries.length === 0 ? "n/a"
          : {0: "closed", 1: "open", 2: "half-open"}[total(P2, "tide_breaker_state", model, version)];
      check(shown.breaker === breaker, `${tag} breaker: shown ${shown.breaker}, metrics ${breaker}`);
      near(shown.errors_per_s, r("tide_requests_total", l => Number(l.status) >= 500), `${tag} 5xx/s`);
      // Score cache, per model and version: hits / (hits + misses) in the page's window.
      const dh = r("tide_score_cache_hits_total") * dt, dm = r("tide_score_cache_misses_total") * dt;
      near(shown.cache_hit_ratio, dh + dm > 0 ? 100 * dh / (dh + dm) : null, `${tag} cache hit ratio % (${dh} hits, ${dm} misses)`);
      near(shown.cache_hits_per_s, dh / dt, `${tag} cache hits/s`);
      if (rps > 1) check(dh > 0 && dm > 0, `${tag} the window holds both cache hits (${dh}) and misses (${dm})`);
      // Rollout: state and agreement are P2's per-model gauges; "n/a" for a model without one.
      const rolloutSeries = P2.filter(s => s.name === "tide_rollout_state" && s.labels.model === model);
      if (rolloutSeries.length === 0) {
        check(shown.rollout === "n/a", `${tag} rollout shows n/a (no rollout)`);
      } else {
        const stateName = {0: "idle", 1: "running", 2: "promoted", 3: "rolled_back"}[rolloutSeries[0].value];
        check(shown.rollout === stateName, `${tag} rollout state: shown ${shown.rollout}, metrics ${stateName}`);
        for (const m of ["spearman", "top1", "ndcg10"]) {
          const a = P2.filter(s => s.name === "tide_rollout_agreement" && s.labels.model === model && s.labels.measure === m);
          near(shown["rollout_" + m], a.length ? a[0].value : null, `${tag} rollout agreement ${m}`);
        }
        // Role and window stats: the page's own GET of the rollout, between the test's two.
        const body = (got.rollouts[model] || {}).body;
        check(body !== undefined, `${tag} the page read GET /v2/models/${model}/rollout`);
        if (body !== undefined) {
          const role = String(body.stable) === version ? "stable" : String(body.candidate) === version ? "candidate" : "other";
          check(shown.rollout_role === `${role} · ${body.mode} ${body.percent}%`,
                `${tag} rollout role: shown "${shown.rollout_role}" (${body.mode} ${body.percent}%, stable ${body.stable})`);
          const w = body.stats[version];
          near(shown.rollout_window_requests, w.requests, `${tag} rollout window answers`);
          near(shown.rollout_window_errors, w.errors, `${tag} rollout window errors`);
          near(shown.rollout_window_p99_ms, w.p99_ms, `${tag} rollout window P99 ms`);
          const [before, after] = [ra.stats[version].requests, rb.stats[version].requests];
          check(before <= w.requests && w.requests <= after && after > before,
                `${tag} rollout window answers ${before} <= ${w.requests} (page) <= ${after}, growing`);
          check(body.state === stateName && ra.candidate === body.candidate && rb.stable === body.stable,
                `${tag} the page's rollout (${body.state}) is the server's`);
        }
      }

      // 3. Live and consistent with the test's own bracket: S_a..S_b holds the page's window plus
      // gaps (wall - dt) of tens of ms; in them each closed-loop client completes at most
      // 1 + gap / P50 requests per edge.
      const count = (A, B, name) => total(B, name, model, version) - total(A, name, model, version);
      const pageReq = count(P1, P2, "tide_requests_total"), testReq = count(SA, SB, "tide_requests_total");
      const p50 = histogramQuantile(0.5, P2, P1, "tide_request_duration_seconds", model, version) || 0.001;
      const slack = 2 * CLIENTS * (1 + Math.ceil((wall - dt) / p50));
      check(rps > 0 && pps > 0, `${tag} under load: ${rps.toFixed(1)} requests/s, ${pps.toFixed(1)} pairs/s`);
      check(testReq - pageReq <= slack,
            `${tag} page window ${pageReq} requests, test window ${testReq} (at most ${slack} more allowed; ` +
            `rates ${rps.toFixed(2)} vs ${(testReq / wall).toFixed(2)} /s)`);
      const pagePairs = count(P1, P2, "tide_batch_size_sum"), testPairs = count(SA, SB, "tide_batch_size_sum");
      check(testPairs - pagePairs <= slack * TEXTS,
            `${tag} page window ${pagePairs} pairs, test window ${testPairs} (at most ${slack * TEXTS} more allowed)`);
    }

    // States a live run rarely shows, drawn from edited scrapes: a rolled-back rollout, and a
    // server without the score cache ("n/a", not 0 %).
    if (hasRollout) {
      const edit = t => t.replace(/^(tide_rollout_state\{[^}]*\}) \S+$/m, "$1 3")
          .split("\n").filter(l => !l.startsWith("tide_score_cache_")).join("\n");
      const drawn = await browser.evaluate(`(() => {
        tideDashboard.renderTexts(${JSON.stringify(edit(got.prevText))}, ${JSON.stringify(edit(got.lastText))}, 2);
        const card = [...document.querySelectorAll("[data-model]")].find(c => c.dataset.model === ${JSON.stringify(ROLLOUT_MODEL)});
        return {rollout: card.querySelector('[data-k="rollout"]').textContent,
                cache: card.querySelector('[data-k="cache_hit_ratio"]').textContent};
      })()`);
      check(drawn.rollout === "rolled_back", `${ROLLOUT_MODEL} a rolled-back rollout is drawn: ${drawn.rollout}`);
      check(drawn.cache === "n/a", `${ROLLOUT_MODEL} cache hit ratio without the cache's families: ${drawn.cache}`);
    }
    await browser.evaluate("tideDashboard.renderTexts(tideDashboard.state.prevText, tideDashboard.state.lastText, " +
                           "tideDashboard.state.windowSeconds) && true");

    // The screenshot, then the timer-driven mode polls by itself.
    const shot = await browser.send("Page.captureScreenshot", {format: "png", captureBeyondViewport: true});
    fs.mkdirSync(path.dirname(screenshotPath), {recursive: true});
    fs.writeFileSync(screenshotPath, Buffer.from(shot.data, "base64"));
    console.log("screenshot: " + screenshotPath);

    await browser.send("Page.navigate", {url: base + "/dashboard?interval=300"});
    await waitFor(browser.evaluate, "window.tideDashboard && tideDashboard.state.polls >= 3 && tideDashboard.state.error === null",
                  "three timer-driven polls");
    check(true, "timer-driven mode: three polls without error");
  } finally {
    await browser.close();
    load.running = false;
    await load.done;
  }
  check(load.failed === 0, `load: ${load.ok} requests answered, ${load.failed} failed`);
  console.log(`${failures === 0 ? "PASSED" : "FAILED"} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  process.exit(failures === 0 ? 0 : 1);
}

main().catch(e => { console.log("FAIL " + (e.stack || e)); process.exit(1); });
