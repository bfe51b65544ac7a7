// The kafkawire console: plain ES module, no build step (served as package data).
const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v; else if (k.startsWith("on")) node.addEventListener(k.slice(2), v); else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c ?? ""));
  return node;
};
async function api(path, options) {
  const response = await fetch(path, options);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// -- pages
for (const button of document.querySelectorAll("nav button")) {
  button.addEventListener("click", () => show(button.dataset.page));
}
function show(page) {
  for (const b of document.querySelectorAll("nav button")) b.classList.toggle("active", b.dataset.page === page);
  for (const s of document.querySelectorAll(".page")) s.hidden = s.id !== page;
  if (page === "topics") loadTopics();
  if (page === "groups") loadGroups();
}

// -- live protocol view
const MAX_ROWS = 500;
const rows = [];
const glob = (pattern) => new RegExp("^" + pattern.split("*").map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*") + "$");
function filters() {
  const f = new FormData($("#filters"));
  const apis = (f.get("api") || "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean);
  const client = f.get("client") ? glob(f.get("client")) : null;
  const topic = f.get("topic") ? glob(f.get("topic")) : null;
  const errors = f.get("errors") === "on";
  return (x) => (!apis.length || apis.includes((x.api || "").toLowerCase()) || apis.includes(String(x.api_key)))
    && (!client || client.test(x.client_id || ""))
    && (!topic || x.topics.some((t) => topic.test(t)))
    && (!errors || x.errors.length || x.problem);
}
function row(x) {
  const time = new Date(x.time_ms).toISOString().slice(11, 23);
  const summary = [x.request_summary && "→ " + x.request_summary, x.response_summary && "← " + x.response_summary,
    !x.response_summary && x.errors.length ? "errors: " + x.errors.join(", ") : "", x.problem ? "!! " + x.problem : ""].filter(Boolean).join(" ");
  const tr = el("tr", { "data-id": x.id, class: x.errors.length || x.problem ? "error" : "" },
    el("td", {}, time), el("td", {}, x.connection), el("td", {}, x.client_id ?? "?"),
    el("td", {}, x.api ? `${x.api} v${x.version}` : "?"), el("td", {}, String(x.correlation_id ?? "")),
    el("td", {}, x.latency_ms == null ? "" : x.latency_ms.toFixed(3)),
    el("td", {}, `${x.request_bytes}>${x.response_bytes}`), el("td", {}, summary));
  tr.addEventListener("click", () => openExchange(x.id, tr));
  return tr;
}
function redraw() {
  const accept = filters();
  const body = $("#exchanges tbody");
  body.replaceChildren(...rows.filter(accept).slice(-MAX_ROWS).reverse().map(row));
}
const seen = new Set();
function add(list) {
  const fresh = list.filter((x) => !seen.has(x.id));
  for (const x of fresh) seen.add(x.id);
  rows.push(...fresh);
  if (rows.length > MAX_ROWS * 2) for (const x of rows.splice(0, rows.length - MAX_ROWS * 2)) seen.delete(x.id);
  if (!$("#filters [name=pause]").checked) redraw();
}
$("#filters").addEventListener("input", redraw);

async function openExchange(id, tr) {
  for (const r of document.querySelectorAll("#exchanges tr.selected")) r.classList.remove("selected");
  tr.classList.add("selected");
  const detail = $("#detail");
  detail.replaceChildren(el("p", { class: "hint" }, "decoding…"));
  try {
    const x = await api(`/api/exchanges/${id}`);
    const parts = [el("h3", {}, `${x.summary.api} v${x.summary.version} corr=${x.summary.correlation_id} (${x.summary.client_id ?? "?"})`)];
    for (const side of ["request", "response"]) if (x[side]) parts.push(el("h4", {}, side), frameView(x[side], side));
    detail.replaceChildren(...parts);
  } catch (e) {
    detail.replaceChildren(el("p", { class: "err" }, String(e)));
  }
}

const HEX_LIMIT = 16384; // bytes drawn; the tree still covers the frame
function frameView(frame, side) {
  const bytes = frame.hex.match(/../g) || [];
  const shown = bytes.slice(0, HEX_LIMIT);
  const hex = el("div", { class: "hex", "data-side": side });
  for (let line = 0; line < shown.length; line += 16) {
    hex.append(el("span", { class: "off" }, line.toString(16).padStart(6, "0") + "  "));
    for (let i = line; i < Math.min(line + 16, shown.length); i++) {
      hex.append(el("span", { class: "b", "data-i": i }, shown[i]), " ");
    }
    hex.append("\n");
  }
  if (bytes.length > shown.length) hex.append(`… ${bytes.length - shown.length} more bytes\n`);
  if (frame.truncated) hex.append("(frame cut: the console keeps the first bytes of large frames)\n");
  const tree = el("div", { class: "tree", "data-side": side });
  const notes = frame.annotations;
  notes.forEach((a, n) => {
    const value = a.value === null || a.value === undefined ? "" : " = " + (typeof a.value === "object" ? JSON.stringify(a.value) : String(a.value));
    const line = el("div", { "data-n": n }, "  ".repeat(a.depth) + a.path.split(".").pop(), el("span", { class: "type" }, ` ${a.type}`),
      value.length > 120 ? value.slice(0, 117) + "…" : value, a.note ? el("span", { class: "note" }, ` (${a.note})`) : "");
    line.title = `${a.path} @${a.offset}+${a.width ?? "?"}`;
    line.addEventListener("mouseenter", () => highlight(hex, tree, n, a));
    line.addEventListener("mouseleave", () => clear(hex, tree));
    tree.append(line);
  });
  if (frame.error) tree.append(el("div", { class: "err" }, frame.error));
  hex.addEventListener("mouseover", (event) => {
    const i = event.target.dataset?.i;
    if (i === undefined) return;
    const at = Number(i);
    let best = -1;
    notes.forEach((a, n) => {
      if (a.width != null && a.offset <= at && at < a.offset + a.width && (best < 0 || a.width <= notes[best].width)) best = n;
    });
    clear(hex, tree);
    if (best >= 0) highlight(hex, tree, best, notes[best]);
  });
  hex.addEventListener("mouseleave", () => clear(hex, tree));
  return el("div", { class: "frame" }, hex, tree);
}
function highlight(hex, tree, n, a) {
  clear(hex, tree);
  tree.querySelector(`[data-n="${n}"]`)?.classList.add("hl");
  const width = a.width ?? 1;
  for (let i = a.offset; i < a.offset + width && i < HEX_LIMIT; i++) hex.querySelector(`[data-i="${i}"]`)?.classList.add("hl");
}
function clear(hex, tree) {
  for (const node of hex.querySelectorAll(".hl")) node.classList.remove("hl");
  for (const node of tree.querySelectorAll(".hl")) node.classList.remove("hl");
}

function connect() {
  const status = $("#status");
  const source = new EventSource("/api/stream");
  source.onopen = () => { status.textContent = "live"; };
  source.onmessage = (event) => {
    const data = JSON.parse(event.data);
    add(data.exchanges);
    status.textContent = data.dropped ? `live (${data.dropped} dropped: the browser fell behind)` : "live";
  };
  source.onerror = () => { status.textContent = "reconnecting…"; };
}

// -- cluster view
async function loadTopics() {
  const body = $("#topic-list tbody");
  try {
    const topics = await api("/api/topics");
    body.replaceChildren(...topics.map((t) => {
      const tr = el("tr", { "data-topic": t.name }, el("td", {}, t.name), el("td", {}, String(t.partitions.length)), el("td", {}, String(t.records)));
      tr.addEventListener("click", () => openTopic(t.name));
      return tr;
    }));
  } catch (e) {
    body.replaceChildren(el("tr", {}, el("td", { class: "err", colspan: 3 }, String(e))));
  }
}
async function openTopic(name) {
  const detail = $("#topic-detail");
  detail.replaceChildren(el("p", { class: "hint" }, "loading…"));
  try {
    const t = await api(`/api/topics/${encodeURIComponent(name)}`);
    const parts = el("table", {}, el("thead", {}, el("tr", {}, ...["partition", "leader", "replicas", "isr", "earliest", "latest", "bytes"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...t.partitions.map((p) => el("tr", {}, ...[p.partition, p.leader, p.replicas.join(","), p.isr.join(","), p.earliest, p.latest, t.sizes[p.partition] ?? ""].map((v) => el("td", {}, String(v)))))));
    const configs = el("table", {}, el("tbody", {}, ...Object.entries(t.configs).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v ?? "")))));
    const browse = el("form", { id: "browse" },
      el("select", { name: "partition" }, ...t.partitions.map((p) => el("option", { value: p.partition }, `partition ${p.partition}`))),
      el("input", { name: "offset", placeholder: "from offset", value: String(t.partitions[0]?.earliest ?? 0) }),
      el("input", { name: "timestamp", placeholder: "or from time (ISO or ms)" }),
      el("select", { name: "format" }, ...["text", "json", "hex"].map((f) => el("option", { value: f }, f))),
      el("button", {}, "Browse"));
    const records = el("div", { id: "records" });
    browse.addEventListener("submit", async (event) => {
      event.preventDefault();
      const f = new FormData(browse);
      const q = new URLSearchParams({ topic: name, partition: f.get("partition"), format: f.get("format") });
      const ts = f.get("timestamp");
      if (ts) q.set("timestamp", /^\d+$/.test(ts) ? ts : String(Date.parse(ts))); else q.set("offset", f.get("offset") || "0");
      records.replaceChildren(el("p", { class: "hint" }, "reading…"));
      try {
        const r = await api(`/api/records?${q}`);
        records.replaceChildren(el("p", {}, `${r.records.length} records from offset ${r.start} (end ${r.end})`),
          el("table", { class: "records" }, el("thead", {}, el("tr", {}, ...["offset", "timestamp", "key", "value", "headers"].map((h) => el("th", {}, h)))),
            el("tbody", {}, ...r.records.map((x) => el("tr", {}, el("td", {}, String(x.offset)), el("td", {}, new Date(x.timestamp).toISOString()),
              el("td", {}, el("pre", { class: "value" }, x.key ?? "null")), el("td", {}, el("pre", { class: "value" }, x.value ?? "null")),
              el("td", {}, x.headers.map(([k, v]) => `${k}=${v}`).join("\n")))))));
      } catch (e) {
        records.replaceChildren(el("p", { class: "err" }, String(e)));
      }
    });
    detail.replaceChildren(el("h3", {}, t.name), parts, el("h4", {}, "Records"), browse, records, el("h4", {}, "Configs"), configs);
    $("#produce [name=topic]").value = t.name;
  } catch (e) {
    detail.replaceChildren(el("p", { class: "err" }, String(e)));
  }
}
$("#produce").addEventListener("submit", async (event) => {
  event.preventDefault();
  const f = new FormData(event.target);
  const headers = Object.fromEntries((f.get("headers") || "").split("\n").filter((l) => l.includes("=")).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
  try {
    const r = await api("/api/produce", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ topic: f.get("topic"), partition: f.get("partition"), key: f.get("key"), value: f.get("value"), headers }) });
    $("#produced").textContent = `written: ${r.topic}-${r.partition}@${r.offset}`;
    loadTopics();
  } catch (e) {
    $("#produced").textContent = String(e);
  }
});
async function loadGroups() {
  const box = $("#group-list");
  try {
    const groups = await api("/api/groups");
    if (!groups.length) { box.replaceChildren(el("p", { class: "hint" }, "no consumer groups")); return; }
    box.replaceChildren(...groups.map((g) => el("div", { class: "group", "data-group": g.group_id },
      el("h3", {}, `${g.group_id} — ${g.state}${g.protocol ? " (" + g.protocol + ")" : ""}`),
      g.error ? el("p", { class: "err" }, g.error) : "",
      el("table", {}, el("thead", {}, el("tr", {}, ...["member", "client", "host", "assignment"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...g.members.map((m) => el("tr", {}, el("td", {}, m.member_id), el("td", {}, m.client_id), el("td", {}, m.host), el("td", {}, m.assignment.join(" ")))))),
      el("table", {}, el("thead", {}, el("tr", {}, ...["topic", "partition", "committed", "end", "lag"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...g.offsets.map((o) => el("tr", {}, ...[o.topic, o.partition, o.committed, o.end, o.lag ?? "-"].map((v) => el("td", {}, String(v))))))))));
  } catch (e) {
    box.replaceChildren(el("p", { class: "err" }, String(e)));
  }
}

api("/api/info").then((info) => { $("#kind").textContent = `${info.kind}${info.bootstrap ? " · " + info.bootstrap : ""}`; });
api("/api/exchanges").then(add);
connect();
