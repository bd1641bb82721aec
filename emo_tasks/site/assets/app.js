/* emo-tasks view: the results browser's script (no dependencies; written for this site, MIT like emo-tasks).

   Routes (the part after #):  ""  the overview;  "<task>"  a task's samples;  "<task>/<key>"  one sample
   (key: the lmms-eval doc id).  With several runs, "?run=r2" says which run (default: the first that has it).

   Data: data/site.js (the overview and every task's meta) is loaded by index.html; a task's samples are in
   chunk files <folder>/<n>.js, loaded on demand by adding a <script> (a page opened from file:// may not fetch).
   A sample is in chunk fnv1a(key) % n_chunks, so its page loads one file.

   Safety: every string of the data (answers, judge text, labels, file names) is inserted as text
   (textContent / createTextNode), never parsed as HTML; links and image sources are built here from
   sanitised names only. */
"use strict";

(function () {
  const state = { site: null, chunks: new Map(), waiting: new Map(), records: new Map() };

  window.emoSite = {
    receive(name, data) {
      if (name === "site") {
        state.site = data;
        return;
      }
      state.chunks.set(name, data);
    },
  };

  // ------------------------------------------------------------------------------------------ helpers
  /** An element with properties and children; strings become text nodes (never HTML). */
  function h(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      e.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return e;
  }

  /** Replace a container's content with `kids` (nested arrays flattened, null and false left out). */
  function mount(parent, ...kids) {
    parent.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false)
      .map((k) => (k instanceof Node ? k : document.createTextNode(String(k)))));
  }

  function humanize(name) {
    const s = String(name).replace(/^details\./, "").replace(/_/g, " ");
    return s.charAt(0).toUpperCase() + s.slice(1);
  }

  function fmt(v, digits) {
    if (v === null || v === undefined) return "—";
    if (typeof v === "number") return Number.isInteger(v) && digits === undefined ? String(v) : v.toFixed(digits ?? 2);
    return String(v);
  }

  function fnv1a(key) {
    let hash = 0x811c9dc5;
    for (let i = 0; i < key.length; i++) {
      hash ^= key.charCodeAt(i);
      hash = Math.imul(hash, 0x01000193) >>> 0;
    }
    return hash >>> 0;
  }

  function route(taskId, key) {
    const [run, task] = taskId.split("/");
    let s = "#" + encodeURIComponent(task);
    if (key !== undefined && key !== null) s += "/" + encodeURIComponent(key);
    if (state.site.runs.length > 1) s += "?run=" + encodeURIComponent(run);
    return s;
  }

  function parseHash() {
    let raw = location.hash.replace(/^#/, "");
    const query = {};
    const q = raw.indexOf("?");
    if (q >= 0) {
      for (const kv of raw.slice(q + 1).split("&")) {
        const [k, v] = kv.split("=");
        if (k) query[decodeURIComponent(k)] = decodeURIComponent(v || "");
      }
      raw = raw.slice(0, q);
    }
    const parts = raw.split("/").filter(Boolean).map(decodeURIComponent);
    return { task: parts[0] || null, key: parts.length > 1 ? parts.slice(1).join("/") : null, run: query.run || null };
  }

  /** The task id ("r1/<task>") a route means: the run asked for, else the first run that has the task. */
  function taskIdFor(task, run) {
    if (run) return state.site.tasks[run + "/" + task] ? run + "/" + task : null;
    const found = state.site.runs.find((r) => state.site.tasks[r.id + "/" + task]);
    return found ? found.id + "/" + task : null;
  }

  function benchOf(meta) {
    return state.site.benchmarks.find((b) => b.key === meta.benchmark);
  }

  function runOf(id) {
    return state.site.runs.find((r) => r.id === id);
  }

  function metricOf(bench, name) {
    return bench.metrics.find((m) => m.name === name) || { name, title: name, doc: "", digits: 2 };
  }

  function verdictClass(v) {
    if (v === "correct") return "badge good";
    if (v === "incorrect") return "badge bad";
    if (v && /fail|error/.test(v)) return "badge warn";
    return "badge";
  }

  function setCrumbs(items) {
    const nav = document.getElementById("crumbs");
    mount(nav, ...items.map(([text, href]) => h("span", null, href ? h("a", { href }, text) : text)));
  }

  // ------------------------------------------------------------------------------------------ data files
  function loadScript(src, name) {
    if (state.chunks.has(name)) return Promise.resolve(state.chunks.get(name));
    if (state.waiting.has(name)) return state.waiting.get(name);
    const p = new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = src;
      s.onload = () => (state.chunks.has(name) ? resolve(state.chunks.get(name)) : reject(new Error(src + " held no data")));
      s.onerror = () => reject(new Error("could not load " + src));
      document.head.appendChild(s);
    });
    state.waiting.set(name, p);
    return p;
  }

  function loadChunk(meta, n) {
    return loadScript(meta.folder + "/" + n + ".js", meta.id + "#" + n);
  }

  /** Every sample of a task (a group: of its leaves), in the run's order. */
  async function loadRecords(meta) {
    if (state.records.has(meta.id)) return state.records.get(meta.id);
    let recs = [];
    if (meta.group) {
      for (const leaf of meta.leaves) recs = recs.concat(await loadRecords(state.site.tasks[leaf]));
    } else {
      const chunks = await Promise.all(Array.from({ length: meta.n_chunks }, (_, n) => loadChunk(meta, n)));
      recs = chunks.flat().sort((a, b) => a.index - b.index);
    }
    state.records.set(meta.id, recs);
    return recs;
  }

  async function loadSample(meta, key) {
    const chunk = await loadChunk(meta, fnv1a(key) % Math.max(1, meta.n_chunks));
    return chunk.find((r) => r.key === key) || null;
  }

  // ------------------------------------------------------------------------------------------ overview
  function renderOverview(app) {
    const site = state.site;
    document.title = "emo-tasks results";
    setCrumbs([]);
    const nRuns = site.runs.length;
    mount(app, 
      h("h1", null, "Results overview"),
      h("p", { class: "lead" },
        `${nRuns} run${nRuns === 1 ? "" : "s"}, generated by ${site.generated_by} on ${site.generated_at}. ` +
        "Each number is the run's result (lmms-eval's); click it to see the samples behind it."),
      h("details", { class: "notes", id: "how-to-read" }, h("summary", null, "How to read the numbers"),
        h("ul", null,
          h("li", null, "The big number: the run's result as lmms-eval reported it; click it for the samples behind it."),
          h("li", null, "[low, high]: its 95 % confidence interval (percentile bootstrap over the per-sample values, 1,000 resamples)."),
          h("li", null, "(n scored, n failed): samples the judge scored, and samples it could not judge (left out of the judge-based values)."),
          h("li", null, "n/a: the run has no value; the run's notes say why."))),
      outsideNotice(site),
      runsBlock(site),
      comparisonsBlock(site),
      site.benchmarks.length ? site.benchmarks.map(benchBlock) : h("p", { class: "error" }, "These runs hold no emo-tasks results."),
    );
  }

  function runsBlock(site) {
    return h("section", { class: "block" },
      h("h2", null, "Runs"),
      h("table", null,
        h("tr", null, h("th", null, "Run"), h("th", null, "Model"), h("th", null, "Date"), h("th", null, "Results file"), h("th", null, "Notes")),
        site.runs.map((r) => h("tr", null,
          h("td", null, r.id.toUpperCase() + ": " + r.label),
          h("td", null, r.model || "?", (r.judge_shutdown || []).length
            ? h("div", { class: "small judge-shutdown" }, "Judge shuts down (the endpoint reported): " + r.judge_shutdown.join("; "))
            : null),
          h("td", null, r.date || "?"),
          h("td", { class: "small" }, r.results_file),
          h("td", null, r.notes.length
            ? h("details", { class: "notes" }, h("summary", null, `${r.notes.length} note${r.notes.length === 1 ? "" : "s"}`),
              h("ul", null, r.notes.map((n) => h("li", null, n))))
            : h("span", { class: "muted" }, "none"))))));
  }

  function comparisonsBlock(site) {
    const pairs = site.comparisons || [];
    if (!pairs.length) return null;
    const label = (id) => id.toUpperCase() + ": " + runOf(id).label;
    return h("section", { class: "block", id: "comparisons" },
      h("h2", null, "Comparisons"),
      h("p", { class: "small muted" }, "Two runs of the same samples, sample by sample. Two runs of a model (or two models): the samples that got worse, flips first. " +
        "Two judges of the same answers: where the judges disagree most, with their agreement figures."),
      h("ul", null, pairs.map((p) => h("li", null,
        h("a", { href: `#compare/${p.a}/${p.b}`, class: "compare-link" }, p.judges ? `Two judges: ${label(p.a)} vs ${label(p.b)}` : `${label(p.a)} → ${label(p.b)}`),
        h("span", { class: "muted" }, p.judges ? ` — ${p.n_changed} sample${p.n_changed === 1 ? "" : "s"} judged differently`
          : ` — ${p.n_flips} flipped, ${p.n_changed} worse in all`)))));
  }

  function benchBlock(bench) {
    const metricsShown = new Set(bench.tables.flatMap((t) => t.column_metrics));
    return h("section", { class: "block", id: "bench-" + bench.key },
      h("h2", null, bench.title),
      bench.unit ? h("p", { class: "lead" }, "Scale of the main scores: " + bench.unit + ".") : null,
      chartBlock(bench),
      h("h3", null, "What the metrics mean"),
      h("dl", { class: "metrics" },
        bench.metrics.filter((m) => metricsShown.has(m.name)).map((m) => [
          h("dt", null, m.title + (m.title !== m.name ? ` (${m.name})` : "") + (m.higher_is_better ? " — higher is better" : " — lower is better")),
          h("dd", null, m.doc + (m.unit ? ` Scale: ${m.unit}.` : "")),
        ])),
      bench.tables.map((t) => tableBlock(bench, t)),
      h("h3", null, "Samples by task"),
      h("ul", null, bench.tasks.map((id) => {
        const meta = state.site.tasks[id];
        return h("li", null, h("a", { href: route(id) }, meta.title),
          h("span", { class: "muted" }, ` — ${meta.n_samples} sample${meta.n_samples === 1 ? "" : "s"}` +
            (meta.group ? ` in ${meta.leaves.length} tasks` : "") + (state.site.runs.length > 1 ? `, run ${meta.run.toUpperCase()}` : "")));
      })));
  }

  function cellContent(c) {
    const text = c.task ? h("a", { href: route(c.run + "/" + c.task), title: "the samples behind this number" }, c.text) : c.text;
    return [text, c.ci ? h("span", { class: "ci" }, c.ci) : null, c.judged ? h("span", { class: "judged" }, "(" + c.judged + ")") : null];
  }

  function tableBlock(bench, t) {
    return h("div", null,
      h("h3", null, bench.grouped ? t.title : `${t.title}: every metric`),
      h("p", { class: "small muted" }, bench.grouped
        ? `Rows: runs. Columns: the tasks of ${bench.title}; Overall: all of them pooled (the benchmark's score).`
        : "Rows: runs. Columns: the metrics (explained above)."),
      h("div", { class: "scroll" }, h("table", { class: "results" },
        h("tr", null, h("th", null, "Run"), t.columns.map((c, i) =>
          h("th", { class: "num", title: metricOf(bench, t.column_metrics[i]).doc }, c))),
        t.rows.map((row) => h("tr", null,
          h("th", null, row.run.toUpperCase() + ": " + row.label),
          row.cells.map((c) => h("td", { class: "num cell" }, cellContent(c))))))));
  }

  function chartBlock(bench) {
    const bars = bench.chart.filter((b) => b.cells.some((c) => c.value !== null));
    if (!bars.length) return null;
    const top = Math.max(100, ...bars.flatMap((b) => b.cells.map((c) => Math.max(c.value ?? 0, c.ci_high ?? 0))));
    const pct = (v) => Math.max(0, Math.min(100, (100 * v) / top)) + "%";
    return h("div", { class: "chart" },
      h("h3", null, "Leaderboard" + (bench.grouped ? " (overall, all tasks pooled)" : "")),
      h("p", { class: "small muted" }, "Bar: the value; black line: its 95 % confidence interval. Axis: " + (bench.unit || "the metric's own scale") + "."),
      bars.map((b) => [
        h("h4", null, b.title),
        b.cells.map((c) => h("div", { class: "row" },
          h("span", { class: "name", title: c.label }, c.run.toUpperCase() + ": " + c.label),
          h("span", { class: "track" },
            c.value !== null ? h("span", { class: "fill", style: null, "data-w": pct(c.value) }) : null,
            c.ci_low !== null && c.ci_high !== null ? h("span", { class: "whisker", "data-l": pct(c.ci_low), "data-w": pct(c.ci_high - c.ci_low) }) : null),
          h("span", { class: "value" }, c.task ? h("a", { href: route(c.run + "/" + c.task) }, c.text) : c.text, c.ci ? " " + c.ci : ""))),
      ]),
      h("div", { class: "axis" }, h("span"), h("span", { class: "ticks" }, h("span", null, "0"), h("span", null, fmt(top / 2, 0)), h("span", null, fmt(top, 0))), h("span")));
  }

  /** Widths and offsets are set as style properties (the page's CSP allows no inline style attribute). */
  function applyGeometry(root) {
    for (const e of root.querySelectorAll("[data-w]")) e.style.width = e.getAttribute("data-w");
    for (const e of root.querySelectorAll("[data-l]")) e.style.left = e.getAttribute("data-l");
    for (const e of root.querySelectorAll("[data-bg]")) {
      const a = Number(e.getAttribute("data-bg"));
      e.style.backgroundColor = `rgba(59, 125, 216, ${(0.08 + 0.8 * a).toFixed(3)})`;
      if (a > 0.55) e.style.color = "#fff";
    }
  }

  // ------------------------------------------------------------------------------------------ task page
  function taskHeader(meta, extra) {
    const bench = benchOf(meta);
    const run = runOf(meta.run);
    setCrumbs([["Overview", "#"], [bench.title, null], [meta.short, extra ? route(meta.id) : null], ...(extra ? [[extra, null]] : [])]);
    const others = state.site.runs.filter((r) => r.id !== meta.run && state.site.tasks[r.id + "/" + meta.task]);
    return [
      others.length ? h("p", { class: "runs-switch" }, "Run: ", h("strong", null, run.id.toUpperCase() + ": " + run.label),
        others.map((r) => h("a", { href: route(r.id + "/" + meta.task) }, r.id.toUpperCase() + ": " + r.label))) : null,
    ];
  }

  async function renderTask(app, meta) {
    const bench = benchOf(meta);
    document.title = meta.title + " — emo-tasks";
    mount(app, h("h1", null, meta.title), ...taskHeader(meta), h("p", { class: "muted" }, "Loading samples…"));
    const recs = await loadRecords(meta);
    const run = runOf(meta.run);
    const verdictNames = Object.keys(meta.verdicts);
    const hasGold = recs.some((r) => r.gold !== null);
    const f = { verdict: "", leaf: "", catField: meta.categories[0] || "", catValue: "", nums: {}, text: "", conf: null, sort: null, limit: 500 };
    const results = h("div");

    const columns = [
      { title: "Sample", get: (r) => (r.doc_id !== null ? r.doc_id : r.key), cell: (r) => h("a", { href: route(meta.run + "/" + r.task, r.key) }, r.doc_id !== null ? "doc " + r.doc_id : r.key) },
      meta.group ? { title: "Task", get: (r) => r.task, cell: (r) => shortTitle(meta.run, r.task) } : null,
      hasGold ? { title: "Gold", get: (r) => r.gold, cell: (r) => fmt(r.gold) } : null,
      verdictNames.length ? { title: "Verdict", get: (r) => r.verdict, cell: (r) => h("span", { class: verdictClass(r.verdict) }, fmt(r.verdict)) } : null,
      ...meta.columns.map((name) => {
        const m = metricOf(bench, name);
        return { title: m.title, doc: m.doc, num: true, get: (r) => r.values[name] ?? null, cell: (r) => fmt(r.values[name] ?? null, m.digits) };
      }),
      ...meta.numbers.map((name) => ({ title: humanize(name), doc: bench.field_docs[name.replace(/^details\./, "")], num: true, get: (r) => value(r, name), cell: (r) => fmt(value(r, name)) })),
      { title: "Answer (excerpt)", get: (r) => answerText(r), cell: (r) => h("div", { class: "excerpt", title: answerText(r).slice(0, 400) }, answerText(r).slice(0, 160)) },
    ].filter(Boolean);

    function shown() {
      const text = f.text.trim().toLowerCase();
      let out = recs.filter((r) =>
        (!f.verdict || String(r.verdict) === f.verdict) &&
        (!f.leaf || r.task === f.leaf) &&
        (!f.catValue || String(value(r, f.catField)) === f.catValue) &&
        Object.entries(f.nums).every(([name, [lo, hi]]) => {
          const v = value(r, name);
          return (lo === null || (v !== null && v >= lo)) && (hi === null || (v !== null && v <= hi));
        }) &&
        (!f.conf || (String(r.gold) === f.conf[0] && String(r.predicted) === f.conf[1])) &&
        (!text || answerText(r).toLowerCase().includes(text)));
      if (f.sort) {
        const { col, dir } = f.sort;
        out = out.slice().sort((a, b) => {
          const x = col.get(a), y = col.get(b);
          if (x === y) return a.index - b.index;
          if (x === null || x === undefined) return 1;
          if (y === null || y === undefined) return -1;
          return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * dir;
        });
      }
      return out;
    }

    function update() {
      const rows = shown();
      const table = h("table", { id: "samples-table" },
        h("tr", null, columns.map((c) => h("th", {
          class: "sortable" + (c.num ? " num" : ""), title: c.doc || "sort by " + c.title,
          onclick: () => { f.sort = { col: c, dir: f.sort && f.sort.col === c ? -f.sort.dir : 1 }; update(); },
        }, c.title))),
        rows.slice(0, f.limit).map((r) => h("tr", { "data-key": r.key, "data-task": r.task },
          columns.map((c) => h("td", { class: c.num ? "num" : null }, c.cell(r))))));
      mount(results, 
        h("p", { class: "count", id: "count" }, `Showing ${rows.length} of ${recs.length} samples` + (rows.length > f.limit ? ` (the first ${f.limit} listed)` : "")),
        f.conf ? h("p", { class: "active-filter", id: "conf-filter" }, `Only the samples with gold "${f.conf[0]}" predicted as "${f.conf[1]}". `,
          h("button", { type: "button", id: "conf-clear", onclick: () => { f.conf = null; update(); } }, "Show all")) : null,
        categoryBlock(rows),
        confusionBlock(rows),
        distributionBlock(rows),
        h("div", { class: "scroll" }, table),
        columnsLegend(),
        rows.length > f.limit ? h("p", { class: "pager" }, h("button", { type: "button", onclick: () => { f.limit += 500; update(); } }, "List 500 more")) : null);
      applyGeometry(results);
    }

    function columnsLegend() {
      const described = columns.filter((c) => c.doc);
      return h("ul", { class: "small muted", id: "columns-legend" }, described.map((c) => h("li", null, c.title + ": " + c.doc)),
        h("li", null, "—: this sample has no value in the column (for instance: the judge failed on it, or an answer gave no usable number)."));
    }

    /** Gold vs predicted label as a heat map: rows gold, columns predicted, each cell its count and row share;
        a cell's colour is its row share; clicking a cell lists its samples. */
    function confusionBlock(rows) {
      const labels = meta.confusion_labels || [];
      const both = rows.filter((r) => r.gold !== null && r.predicted !== null && r.predicted !== undefined);
      if (!labels.length) return null;
      const count = new Map();
      for (const r of both) count.set(String(r.gold) + "\u0000" + String(r.predicted), (count.get(String(r.gold) + "\u0000" + String(r.predicted)) || 0) + 1);
      // rows: the task's gold labels; columns: every label (a gold label never predicted keeps its empty column)
      const golds = labels.filter((g) => recs.some((r) => String(r.gold) === g)), preds = labels;
      const totals = new Map();  // gold -> its row's count, once per row (a group page has hundreds of labels)
      for (const r of both) totals.set(String(r.gold), (totals.get(String(r.gold)) || 0) + 1);
      const rowTotal = (g) => totals.get(g) || 0;
      const diag = golds.reduce((n, g) => n + (count.get(g + "\u0000" + g) || 0), 0);
      return h("section", { class: "block", id: "confusion" },
        h("h3", null, "Confusion matrix: gold label (rows) vs the label the answer names (columns)"),
        h("p", { class: "small muted" }, `Each cell: how many of the ${both.length} listed samples with both labels have this gold label and this predicted label, and that count as a share of its row (darker = larger share). ` +
          `Framed: the diagonal, where the answer names the gold label (${diag} of ${both.length}). Click a cell to list its samples.` +
          (rows.length > both.length ? ` Left out: ${rows.length - both.length} listed sample${rows.length - both.length === 1 ? "" : "s"} without a predicted label (no answer label, or a judge failure).` : "")),
        both.length ? h("div", { class: "scroll" }, h("table", { class: "confusion" },
          h("tr", null, h("th", { class: "corner" }, "gold ↓ / predicted →"), preds.map((p) => h("th", { class: "num", scope: "col" }, p)), h("th", { class: "num" }, "Total")),
          golds.map((g) => h("tr", null, h("th", { scope: "row" }, g),
            preds.map((p) => {
              const n = count.get(g + "\u0000" + p) || 0;
              const share = rowTotal(g) ? n / rowTotal(g) : 0;
              return h("td", {
                class: "num heat" + (g === p ? " diag" : "") + (n ? " clickable" : ""), "data-gold": g, "data-pred": p, "data-n": n,
                "data-bg": share.toFixed(3), title: `gold ${g}, predicted ${p}: ${n} sample${n === 1 ? "" : "s"} (${(100 * share).toFixed(0)} % of the gold ${g} row)`,
                onclick: n ? () => { f.conf = [g, p]; f.limit = 500; update(); } : null,
              }, h("span", { class: "n" }, String(n)), h("span", { class: "share" }, (100 * share).toFixed(0) + " %"));
            }),
            h("td", { class: "num muted" }, String(rowTotal(g))))))) : h("p", { class: "muted" }, "No listed sample has both a gold and a predicted label."));
    }

    /** How the listed samples' per-step values spread (a details list of dicts with a numeric "value"). */
    function ratingBlock(rows) {
      const charts = (meta.ratings || []).map((name) => {
        const counts = new Map();
        for (const r of rows) {
          const items = value(r, name);
          if (!Array.isArray(items)) continue;
          for (const x of items) if (x && typeof x.value === "number") counts.set(x.value, (counts.get(x.value) || 0) + 1);
        }
        if (!counts.size) return null;
        const keys = [...counts.keys()].sort((a, b) => a - b);
        const doc = bench.field_docs[name.replace(/^details\./, "")];
        return h("div", { class: "distribution", "data-field": name + ".value" },
          h("h3", null, `${humanize(name)}: how the rated values spread`),
          doc ? h("p", { class: "small muted" }, doc) : null,
          barChart([["ratings", Object.fromEntries(keys.map((k) => [fmt(k, 2), counts.get(k)]))]],
            { unit: ["rating", "ratings"], caption: `Left: a value given to one item of ${humanize(name).toLowerCase()} (0 = worst, 1 = best for a rating n/d); bar and number: how many items of the listed samples got it.` }));
      });
      return charts.filter(Boolean);
    }

    /** How the listed samples spread over each numeric field with few distinct values (e.g. the step count). */
    function distributionBlock(rows) {
      const charts = meta.numbers.map((name) => {
        const counts = new Map();
        for (const r of rows) {
          const v = value(r, name);
          if (typeof v === "number") counts.set(v, (counts.get(v) || 0) + 1);
        }
        if (!counts.size || counts.size > 30) return null;
        const keys = [...counts.keys()].sort((a, b) => a - b);
        return h("div", { class: "distribution", "data-field": name },
          h("h3", null, `${humanize(name)}: how many samples have each value`),
          bench.field_docs[name.replace(/^details\./, "")] ? h("p", { class: "small muted" }, bench.field_docs[name.replace(/^details\./, "")]) : null,
          barChart([["samples", Object.fromEntries(keys.map((k) => [String(k), counts.get(k)]))]],
            { unit: ["sample", "samples"], caption: `Left: a value of ${humanize(name).toLowerCase()}; bar and number: how many of the samples listed below have it.` }));
      });
      const all = [...charts.filter(Boolean), ...ratingBlock(rows)];
      return all.length ? h("section", { class: "block distributions" }, all) : null;
    }

    function categoryBlock(rows) {
      if (!f.catField) return null;
      const groups = new Map();
      for (const r of rows) {
        const k = value(r, f.catField);
        const key = k === null || k === undefined ? "(none)" : f.catField === "task" ? shortTitle(meta.run, k) : String(k);
        if (!groups.has(key)) groups.set(key, []);
        groups.get(key).push(r);
      }
      const metrics = meta.columns.map((n) => metricOf(bench, n));
      return h("section", { class: "block", id: "by-category" },
        h("h3", null, "Scores by " + humanize(f.catField).toLowerCase()),
        h("p", { class: "small muted" }, "Mean of each per-sample value over the samples listed below (filters apply), per " + humanize(f.catField).toLowerCase() + "."),
        h("table", null,
          h("tr", null, h("th", null, humanize(f.catField)), h("th", { class: "num" }, "Samples"),
            verdictNames.map((v) => h("th", { class: "num" }, v)), metrics.map((m) => h("th", { class: "num", title: m.doc }, "Mean " + m.title))),
          [...groups.entries()].sort((a, b) => b[1].length - a[1].length).map(([k, rs]) => h("tr", null,
            h("td", null, k), h("td", { class: "num" }, rs.length),
            verdictNames.map((v) => h("td", { class: "num" }, rs.filter((r) => r.verdict === v).length)),
            metrics.map((m) => {
              const vals = rs.map((r) => r.values[m.name]).filter((x) => typeof x === "number");
              return h("td", { class: "num" }, vals.length ? fmt(vals.reduce((a, b) => a + b, 0) / vals.length, m.digits) : "n/a");
            })))));
    }

    const select = (id, label, options, onchange) => h("label", null, label,
      h("select", { id, onchange: (e) => { onchange(e.target.value); f.limit = 500; update(); } },
        options.map(([v, text]) => h("option", { value: v }, text))));
    const catValues = (field) => [...new Set(recs.map((r) => value(r, field)).filter((v) => v !== null && v !== undefined).map(String))].sort();
    let catValueBox = null;
    const catLabel = (v) => (f.catField === "task" ? shortTitle(meta.run, v) : v);
    const catValueSelect = () => select("f-cat-value", "equal to", [["", "any"], ...catValues(f.catField).map((v) => [v, catLabel(v)])], (v) => { f.catValue = v; });

    const filters = h("div", { class: "filters" },
      verdictNames.length ? select("f-verdict", "Verdict", [["", `any (${recs.length})`], ...verdictNames.map((v) => [v, `${v} (${meta.verdicts[v]})`])], (v) => { f.verdict = v; }) : null,
      meta.group ? select("f-task", "Task", [["", "any"], ...meta.leaves.map((id) => [id.split("/")[1], state.site.tasks[id].short])], (v) => { f.leaf = v; }) : null,
      meta.categories.length ? h("label", null, "Scores and filter by",
        h("select", { id: "f-cat-field", onchange: (e) => { f.catField = e.target.value; f.catValue = ""; const box = catValueSelect(); catValueBox.replaceWith(box); catValueBox = box; update(); } },
          meta.categories.map((c) => h("option", { value: c }, humanize(c))))) : null,
      meta.categories.length ? (catValueBox = catValueSelect()) : null,
      meta.numbers.map((name) => [["min", 0], ["max", 1]].map(([side, i]) => h("label", null, `${humanize(name)} ${side}`,
        h("input", { type: "number", id: `f-num-${name.replace(/^details\./, "")}-${side}`, oninput: (e) => {
          const range = f.nums[name] || [null, null];
          range[i] = e.target.value === "" ? null : Number(e.target.value);
          f.nums[name] = range;
          f.limit = 500;
          update();
        } })))),
      h("label", null, "Search the answers", h("input", { type: "search", id: "f-text", placeholder: "words in the model's answers", oninput: (e) => { f.text = e.target.value; f.limit = 500; update(); } })));

    mount(app, 
      h("h1", null, meta.title),
      ...taskHeader(meta),
      h("p", { class: "lead" }, `Run ${run.id.toUpperCase()}: ${run.label}. ${recs.length} sample${recs.length === 1 ? "" : "s"}` +
        (verdictNames.length ? ": " + verdictNames.map((v) => `${meta.verdicts[v]} ${v}`).join(", ") : "") + ". Click a sample to see its evidence."),
      notesBlock(meta),
      recs.length ? [filters, results] : h("p", { class: "error" }, "No samples to show for this task in this run (see the notes above, or the run's notes on the overview)."));
    if (recs.length) update();
  }

  function notesBlock(meta) {
    return meta.notes.length ? h("details", { class: "notes", open: "" }, h("summary", null, "Notes on this task"), h("ul", null, meta.notes.map((n) => h("li", null, n)))) : null;
  }

  function shortTitle(run, task) {
    const meta = state.site.tasks[run + "/" + task];
    return meta ? meta.short : task;
  }

  function value(r, name) {
    if (name.startsWith("details.")) {
      const v = r.details[name.slice(8)];
      return v === undefined ? null : v;
    }
    return r[name] === undefined ? null : r[name];
  }

  function answerText(r) {
    return r.answers.length === 1 ? r.answers[0] : r.answers.map((a, i) => `[${i + 1}] ${a}`).join("  ");
  }

  // ------------------------------------------------------------------------------------------ sample page
  async function renderSample(app, meta, key) {
    const bench = benchOf(meta);
    document.title = `${meta.short} ${key} — emo-tasks`;
    mount(app, h("h1", null, meta.title), ...taskHeader(meta, "sample " + key), h("p", { class: "muted" }, "Loading the sample…"));
    const r = await loadSample(meta, key);
    if (!r) {
      mount(app, h("h1", null, meta.title), ...taskHeader(meta, "sample " + key),
        h("p", { class: "error" }, `No sample ${key} in ${meta.task} (run ${meta.run.toUpperCase()}).`), h("a", { href: route(meta.id) }, "All samples of this task"));
      return;
    }
    const run = runOf(meta.run);
    const docs = bench.field_docs || {};
    const others = state.site.runs.filter((x) => x.id !== meta.run && state.site.tasks[x.id + "/" + meta.task]);
    mount(app, 
      h("h1", null, `${meta.title}: ${r.doc_id !== null ? "doc " + r.doc_id : r.key}`),
      ...taskHeader(meta, "sample " + key),
      h("p", { class: "neighbours" },
        r.prev ? h("a", { href: route(meta.id, r.prev), id: "prev" }, "← previous sample") : h("span", { class: "muted" }, "← first sample"),
        h("a", { href: route(meta.id) }, "all samples of this task"),
        r.next ? h("a", { href: route(meta.id, r.next), id: "next" }, "next sample →") : h("span", { class: "muted" }, "last sample →")),
      facts([
        ["Run", `${run.id.toUpperCase()}: ${run.label}`],
        ["Task", meta.task],
        ["lmms-eval doc id", fmt(r.doc_id)],
        r.gold !== null ? ["Gold (expected answer)", [r.gold, docs.gold ? h("span", { class: "small muted" }, " — " + docs.gold) : null]] : null,
        r.verdict !== null ? ["Verdict", [h("span", { class: verdictClass(r.verdict) }, r.verdict), docs.verdict ? h("span", { class: "small muted" }, " — " + docs.verdict) : null]] : null,
        others.length ? ["Same sample in", others.map((x) => h("a", { href: route(x.id + "/" + meta.task, r.key) }, x.id.toUpperCase() + " "))] : null,
      ]),
      valuesBlock(bench, r),
      r.media.length ? mediaBlock(r.media, docs.media) : null,
      r.prompt !== null ? section("Prompt (what the model was asked)", docs.prompt, h("pre", { class: "text", id: "s-prompt" }, r.prompt)) : null,
      section(r.answers.length === 1 ? "The model's answer" : `The model's ${r.answers.length} answers`, docs.answers,
        h("div", { id: "s-answers" }, r.answers.map((a, i) => [r.answers.length > 1 ? h("h4", null, `Answer ${i + 1}`) : null, h("pre", { class: "text" }, a)]))),
      detailsBlock(r.details, docs));
    applyGeometry(app);
  }

  function facts(pairs) {
    return h("div", { class: "grid", id: "s-facts" }, pairs.filter(Boolean).map(([k, v]) => [h("span", null, k), h("span", null, v)]));
  }

  /** A group has no samples of its own: a sample is addressed by its task (each task has its own doc ids). */
  function renderGroupKey(app, meta, key) {
    setCrumbs([["Overview", "#"], [benchOf(meta).title, null], [meta.short, route(meta.id)], ["sample " + key, null]]);
    mount(app, h("h1", null, meta.title), h("p", null, `${meta.task} groups several tasks, each with its own doc ids. Sample ${key} of:`),
      h("ul", null, meta.leaves.map((leaf) => h("li", null, h("a", { href: route(leaf, key) }, state.site.tasks[leaf].title)))));
  }

  function section(title, doc, ...body) {
    return h("section", { class: "block" }, h("h2", null, title), doc ? h("p", { class: "small muted" }, doc) : null, body);
  }

  function valuesBlock(bench, r) {
    const names = Object.keys(r.values);
    if (!names.length) return section("Scores of this sample", null, h("p", { class: "muted" }, "This sample has no per-sample value (for instance: the judge failed on it)."));
    return section("Scores of this sample", "Each is this sample's contribution to the run's metric of the same name (the run's number is their mean).",
      h("table", { id: "s-values" },
        h("tr", null, h("th", null, "Metric"), h("th", { class: "num" }, "Value"), h("th", null, "What it measures")),
        names.map((n) => {
          const m = metricOf(bench, n);
          return h("tr", null, h("td", null, m.title), h("td", { class: "num" }, fmt(r.values[n], m.digits)), h("td", { class: "small" }, m.doc + (m.unit ? ` Scale: ${m.unit}.` : "")));
        })));
  }

  function mediaBlock(media, doc) {
    const safe = /^media\/[0-9a-f]{64}\.jpg$/;
    const images = media.filter((m) => m.thumb && safe.test(m.thumb));
    const texts = media.filter((m) => !(m.thumb && safe.test(m.thumb)));
    return section("Media", doc || (images.length ? `${images.length} image${images.length === 1 ? "" : "s"} (thumbnails, at most 320 px a side).` : null),
      h("div", { class: "thumbs", id: "s-media" }, images.map((m, i) => h("figure", null,
        h("img", { src: m.thumb, alt: `image ${i + 1}: ${m.text}`, loading: "lazy" }),
        h("figcaption", null, `${i + 1}. ${m.text.split("/").pop()}`)))),
      texts.length ? h("ul", null, texts.map((m) => h("li", null, m.text, m.outside ? [" ", outsideBadge()] : null))) : null);
  }

  // An image the run names outside its own folder and the benchmark's data: named, never placed in the site.
  const OUTSIDE = "not shown: outside the run and the data";
  function outsideBadge() {
    return h("span", { class: "badge warn outside", title: "This file lies outside the run folder and the benchmark's data, so the site does not include it (a run folder may name any file of the machine that wrote the site)." }, OUTSIDE);
  }

  function outsideNotice(site) {
    const n = site.media_not_shown || 0;
    if (!n) return null;
    const runs = site.runs.filter((r) => r.media_not_shown);
    return h("p", { class: "notice", id: "media-not-shown" },
      h("strong", null, `${n} media file${n === 1 ? "" : "s"} ${OUTSIDE}. `),
      (runs.length === 1 ? `Run ${runs[0].id.toUpperCase()} names image files` : `Runs ${runs.map((r) => `${r.id.toUpperCase()} (${r.media_not_shown})`).join(", ")} name image files`) +
      " that lie neither inside its run folder nor in the benchmark's data. To keep the files of the machine that wrote this site out of it, " +
      "the site does not include them: their samples show the file's name instead, marked like this: ", outsideBadge());
  }

  // ------------------------------------------------------------------------------------------ details
  const isNumber = (v) => typeof v === "number";
  const isNumberDict = (v) => v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length > 0 &&
    Object.values(v).every((x) => x === null || isNumber(x)) && Object.values(v).some(isNumber);

  function detailsBlock(details, docs) {
    const names = Object.keys(details);
    if (!names.length) return null;
    const out = [];
    const charted = new Set();
    const empty = names.filter((n) => details[n] === null || details[n] === undefined);
    for (const name of names) {
      if (charted.has(name) || empty.includes(name)) continue;
      const v = details[name];
      if (isNumberDict(v)) {  // dicts of numbers sharing their keys become one chart (e.g. predicted vs observed)
        const sig = Object.keys(v).join("\u0000");
        const series = names.filter((n) => isNumberDict(details[n]) && Object.keys(details[n]).join("\u0000") === sig);
        series.forEach((n) => charted.add(n));
        out.push(h("div", { class: "detail", "data-field": name },
          h("h3", null, series.map(humanize).join(" and ")),
          series.map((n) => (docs[n] ? h("p", { class: "small muted" }, humanize(n) + ": " + docs[n]) : null)),
          barChart(series.map((n) => [n, details[n]]))));
        continue;
      }
      out.push(h("div", { class: "detail", "data-field": name },
        h("h3", null, humanize(name)), docs[name] ? h("p", { class: "small muted" }, docs[name]) : null, renderValue(v, 0)));
    }
    if (empty.length) {
      out.push(h("p", { class: "small muted" }, "Not set for this sample: " + empty.map((n) => humanize(n).toLowerCase() + (docs[n] ? ` (${docs[n]})` : "")).join("; ") + "."));
    }
    return section("Evidence and details", "What the benchmark recorded for this sample.", h("div", { id: "s-details" }, out));
  }

  function renderValue(v, depth) {
    if (v === null || v === undefined) return h("span", { class: "muted" }, "—");
    if (typeof v === "string") return v.includes("\n") || v.length > 80 ? h("pre", { class: "text" }, v) : h("span", null, v);
    if (typeof v !== "object") return h("span", null, fmt(v));
    if (Array.isArray(v)) {
      if (!v.length) return h("span", { class: "muted" }, "(none)");
      if (v.every((x) => x === null || typeof x !== "object")) {
        return v.every((x) => typeof x === "number") ? h("span", null, v.map((x) => fmt(x)).join(", ")) : h("ol", null, v.map((x) => h("li", null, renderValue(x, depth + 1))));
      }
      if (v.every((x) => x && typeof x === "object" && !Array.isArray(x))) {
        const cols = [...new Set(v.flatMap((x) => Object.keys(x)))];
        return h("table", null, h("tr", null, h("th", null, "#"), cols.map((c) => h("th", null, humanize(c)))),
          v.map((x, i) => h("tr", null, h("td", { class: "num" }, i + 1), cols.map((c) => h("td", { class: isNumber(x[c]) ? "num" : null }, depth < 3 ? renderValue(x[c], depth + 1) : JSON.stringify(x[c]))))));
      }
      if (v.every((x) => Array.isArray(x))) {
        return h("table", null, v.map((row, i) => h("tr", null, h("td", { class: "num" }, i + 1), row.map((x) => h("td", null, depth < 3 ? renderValue(x, depth + 1) : JSON.stringify(x))))));
      }
      return h("ol", null, v.map((x) => h("li", null, depth < 3 ? renderValue(x, depth + 1) : JSON.stringify(x))));
    }
    if (isNumberDict(v)) return barChart([["value", v]]);
    return h("table", null, Object.entries(v).map(([k, x]) => h("tr", null, h("th", null, humanize(k)), h("td", null, depth < 3 ? renderValue(x, depth + 1) : JSON.stringify(x)))));
  }

  /** Horizontal bars: one row per key, one bar per series, each series scaled to its own largest value. */
  function barChart(series, opts) {
    const { caption, unit } = opts || {};  // unit: [one, many], e.g. ["sample", "samples"]
    const keys = Object.keys(series[0][1]);
    const tops = series.map(([, d]) => Math.max(0, ...Object.values(d).filter(isNumber)));
    return h("div", { class: "chart" },
      series.length > 1 ? h("div", { class: "legend" }, series.map(([n], i) => h("span", null, h("span", { class: `swatch series-${(i % 4) + 1}` }), humanize(n)))) : null,
      keys.map((k) => series.map(([n, d], i) => h("div", { class: "row" },
        h("span", { class: "name" }, i === 0 ? k : ""),
        h("span", { class: "track" }, isNumber(d[k]) ? h("span", { class: `fill series-${(i % 4) + 1}`, "data-w": (tops[i] > 0 ? (100 * d[k]) / tops[i] : 0) + "%" }) : null),
        h("span", { class: "value" }, (series.length > 1 ? humanize(n) + ": " : "") + fmt(d[k]) + (unit ? " " + unit[d[k] === 1 ? 0 : 1] : ""))))),
      h("p", { class: "small muted" }, caption || (series.length > 1
        ? "Each series is drawn against its own largest value (the bars compare within a colour); the numbers are the values."
        : "Bars are drawn against the largest value; the numbers are the values.")));
  }

  // ------------------------------------------------------------------------------------------ comparison page
  /** Two runs (A → B) of the same samples, paired by doc id: per task, the flipped samples first (correct → not
      correct, or a headline value from above 0 to 0), then the largest drops; two judges: the largest differences. */
  async function renderCompare(app, key) {
    const [a, b] = key.split("/");
    const entry = (state.site.comparisons || []).find((p) => p.a === a && p.b === b);
    if (!entry) {
      setCrumbs([["Overview", "#"]]);
      mount(app, h("h1", null, "Not found"), h("p", { class: "error" }, `No comparison of ${a} and ${b} in this site.`), h("a", { href: "#" }, "Back to the overview"));
      return;
    }
    const name = `compare/${a}-${b}`;
    const data = await loadScript(entry.file, name);
    const ra = runOf(a), rb = runOf(b);
    const judges = data.judges;
    const title = judges ? "Two judges of the same answers" : "Two runs side by side";
    document.title = title + " — emo-tasks";
    setCrumbs([["Overview", "#"], [title, null]]);
    const side = judges ? ["Judge A", "Judge B"] : ["Base (A)", "New (B)"];
    mount(app,
      h("h1", null, title),
      h("div", { class: "grid", id: "compare-runs" },
        [[side[0], ra], [side[1], rb]].map(([label, r]) => [h("span", null, label),
          h("span", null, `${r.id.toUpperCase()}: ${r.label} `, h("span", { class: "small muted" }, r.results_file))])),
      h("p", { class: "lead" }, judges
        ? "The same answers judged twice. Listed first: the samples where the two judges' per-sample values differ most (the largest absolute difference of the headline values), with both judges' texts side by side."
        : "The same samples in two runs, paired by their lmms-eval doc id. Listed first: the samples that flipped (verdict correct → anything else, or a headline per-sample value from above 0 to 0); then the other samples whose headline values dropped, the largest drop first. Samples that improved or did not change are not listed."),
      judges ? agreementBlock(data) : null,
      data.tasks.map((t) => compareTask(t, a, b, side, judges)));
  }

  function compareTask(t, a, b, side, judges) {
    const bench = benchOf(state.site.tasks[a + "/" + t.task]);
    const shown = t.rows.length < t.n_changed ? ` (the first ${t.rows.length} listed)` : "";
    return h("section", { class: "block compare-task", "data-task": t.task },
      h("h2", null, t.title),
      h("p", { class: "count" }, judges
        ? `${t.n_paired} paired samples; ${t.n_changed} judged differently${shown}.`
        : `${t.n_paired} paired samples; ${t.n_flips} flipped, ${t.n_changed} worse in all${shown}.`),
      h("details", { class: "notes small" }, h("summary", null, "Per-sample values compared (higher is better): " + t.metrics.map((m) => metricOf(bench, m).title).join(", ")),
        h("ul", null, t.metrics.map((m) => { const x = metricOf(bench, m); return h("li", null, x.doc.startsWith(x.title) ? x.doc : `${x.title} (${m}): ${x.doc}`); }))),
      t.rows.length ? t.rows.map((c) => changeBlock(c, t, bench, a, b, side, judges))
        : h("p", { class: "muted" }, judges ? "The two judges agree on every paired sample." : "No sample of this task got worse."));
  }

  /** One changed sample: what changed, then both sides (verdict, values, answers, texts), each linking to its page. */
  function changeBlock(c, t, bench, a, b, side, judges) {
    const same = sameTexts(c, judges);
    return h("div", { class: "change" + (c.flip ? " flipped" : ""), "data-key": c.a, "data-flip": c.flip ? "1" : "0" },
      h("h3", null,
        judges ? h("span", { class: "badge warn" }, `differs by ${fmt(c.diff, 2)}`) : c.flip ? h("span", { class: "badge bad" }, "flipped") : h("span", { class: "badge" }, `dropped by ${fmt(c.drop, 2)}`),
        " ", c.doc_id !== null ? "doc " + c.doc_id : c.a, c.sa.gold !== null ? ` (gold: ${c.sa.gold})` : "", ": ", h("span", { class: "what" }, c.what)),
      h("div", { class: "pair" }, [[side[0], a, c.sa], [side[1], b, c.sb]].map(([label, run, s]) => h("div", null,
        h("h4", null, label + " ", h("a", { href: route(run + "/" + t.task, s.key) }, "sample page →")),
        h("p", null, "Verdict: ", s.verdict !== null ? h("span", { class: verdictClass(s.verdict) }, s.verdict) : "—", "  ",
          t.metrics.map((m) => `${metricOf(bench, m).title} ${fmt(s.values[m] ?? null, metricOf(bench, m).digits)}  `)),
        judges ? null : h("div", null, h("strong", null, s.answers.length === 1 ? "Answer" : "Answers"), h("pre", { class: "text" }, answerText(s))),
        s.predicted !== null && s.predicted !== undefined ? h("p", null, "Predicted label: ", h("strong", null, s.predicted)) : null,
        Object.entries(s.texts).filter(([k]) => !same.includes(k)).map(([k, v]) => h("div", { class: "side-text", "data-field": k }, h("strong", null, humanize(k) + ": "), renderValue(v, 0)))))),
      same.length ? h("p", { class: "small muted" }, "The same for both judges: " + same.map((k) => humanize(k).toLowerCase()).join(", ") + " (on the sample pages).") : null);
  }

  /** The text details equal on both sides (a judges' page shows only those that differ: the judge's own texts). */
  function sameTexts(c, judges) {
    if (!judges) return [];
    return Object.keys(c.sa.texts).filter((k) => c.sb.texts[k] === c.sa.texts[k]);
  }

  /** `emo-tasks agreement`'s figures: per task and overall, rating agreement and the score difference B - A. */
  function agreementBlock(data) {
    const doc = data.agreement;
    if (!doc) return section("Agreement of the two judges", null, h("p", { class: "muted", id: "agreement" }, "No agreement figures: " + (data.agreement_error || "unknown reason") + "."));
    const f3 = (x) => (x === null || x === undefined ? "—" : fmt(x, 3));
    const metrics = state.site.benchmarks.flatMap((b) => b.metrics);
    const scoreTitle = (m) => (metrics.find((x) => x.name === m) || { title: m }).title;
    const blocks = [...doc.tasks, doc.overall];
    const ratingRow = (label, r) => h("tr", null, h("td", null, label), h("td", { class: "num" }, r.n), h("td", { class: "num" }, f3(r.spearman)),
      h("td", { class: "num" }, f3(r.cohen_kappa)), h("td", { class: "num" }, f3(r.icc)), h("td", { class: "num" }, f3(r.mean_offset)));
    return section("Agreement of the two judges", "As `emo-tasks agreement` computes it (" + doc.icc_form + ", " + doc.resamples + " bootstrap resamples). " +
        "Spearman: rank correlation of the paired ratings; Cohen's κ: agreement beyond chance (1 = always the same rating, 0 = chance); ICC: intra-class correlation; offset: mean rating of B minus A.",
      h("div", { id: "agreement" },
        h("h3", null, "Ratings"),
        h("table", null, h("tr", null, h("th", null, "Task: ratings"), h("th", { class: "num" }, "Pairs"), h("th", { class: "num" }, "Spearman"), h("th", { class: "num" }, "Cohen's κ"), h("th", { class: "num" }, "ICC"), h("th", { class: "num" }, "Offset B − A")),
          blocks.map((blk) => [ratingRow(`${blk.title}: every step`, blk.steps), ratingRow(`${blk.title}: last step`, blk.last_step)])),
        h("h3", null, "Scores (mean per-sample value of each judge)"),
        h("table", null, h("tr", null, h("th", null, "Task"), h("th", null, "Score"), h("th", { class: "num" }, "Pairs"), h("th", { class: "num" }, "A"), h("th", { class: "num" }, "B"), h("th", { class: "num" }, "B − A"), h("th", { class: "num" }, "95 % CI"), h("th", { class: "num" }, "p")),
          blocks.map((blk) => Object.entries(blk.scores).map(([m, sc]) => h("tr", null, h("td", null, blk.title), h("td", null, scoreTitle(m)), h("td", { class: "num" }, sc.n),
            h("td", { class: "num" }, f3(sc.a)), h("td", { class: "num" }, f3(sc.b)), h("td", { class: "num" }, f3(sc.delta)),
            h("td", { class: "num" }, sc.ci_low === null ? "—" : `[${f3(sc.ci_low)}, ${f3(sc.ci_high)}]`), h("td", { class: "num" }, f3(sc.p_value)))))),
        doc.notes.length ? h("details", { class: "notes" }, h("summary", null, `${doc.notes.length} note${doc.notes.length === 1 ? "" : "s"}`), h("ul", null, doc.notes.map((n) => h("li", null, n)))) : null));
  }

  // ------------------------------------------------------------------------------------------ router
  async function render() {
    const app = document.getElementById("app");
    if (!state.site) {
      mount(app, h("p", { class: "error" }, "data/site.js did not load: open index.html from the folder `emo-tasks view` wrote, with its data/ folder beside it."));
      return;
    }
    const { task, key, run } = parseHash();
    try {
      if (!task) renderOverview(app);
      else if (task === "compare" && key) await renderCompare(app, key);
      else {
        const id = taskIdFor(task, run);
        if (!id) {
          setCrumbs([["Overview", "#"]]);
          mount(app, h("h1", null, "Not found"), h("p", { class: "error" }, `No task ${task}` + (run ? ` in run ${run}` : "") + " in this site."), h("a", { href: "#" }, "Back to the overview"));
        } else if (key === null) await renderTask(app, state.site.tasks[id]);
        else if (state.site.tasks[id].group) renderGroupKey(app, state.site.tasks[id], key);
        else await renderSample(app, state.site.tasks[id], key);
      }
      applyGeometry(app);
      window.scrollTo(0, 0);
    } catch (err) {
      mount(app, h("p", { class: "error" }, "This page could not be shown: " + err.message));
    }
  }

  window.addEventListener("hashchange", render);
  window.addEventListener("DOMContentLoaded", render);
})();
