// privrec's page: the catalog, the person's ratings (IndexedDB, never
// sent), the wasm client that answers the run's masked rounds, the
// privacy panel and the recommendations computed in this browser.
"use strict";

const SERVICE = "/privrec.federation.v1.FederationService/";
const $ = (id) => document.getElementById(id);

// The page's observable state, for the person (the panel) and for the
// end-to-end test.
const page = window.privrecPage = {
  ready: false, plan: null, ratings: new Map(), events: [], result: null, error: null,
  identity: null, trained: false,
  trust: null, // the enrolment authority pinned for the active protocol: { authorityUrl, authorityKey }, or null
  runs: 0, // joins so far; "Forget me" counts as one, so a stopped join stays silent
};

// IndexedDB: one store of keyed values ("ratings", "identity", "result",
// "memory"). "identity" is { cred, origin } and, with an authority
// pinned, the device's Ed25519 key, its certificate and the pinned
// authority ({ key, cert, authority, code while not yet certified });
// "memory" is the wasm client's memory of the rounds it answered, per
// plan, which it saves (and waits for) before any answer leaves.
function db() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open("privrec", 1);
    req.onupgradeneeded = () => req.result.createObjectStore("kv");
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}
async function kvGet(key) {
  const d = await db();
  return new Promise((resolve, reject) => {
    const r = d.transaction("kv").objectStore("kv").get(key);
    r.onsuccess = () => { d.close(); resolve(r.result); };
    r.onerror = () => { d.close(); reject(r.error); };
  });
}
async function kvPut(key, value) {
  const d = await db();
  return new Promise((resolve, reject) => {
    // "strict": complete only once the write is on disk (the memory of
    // the rounds answered must survive a crash, not only a reload).
    const tx = d.transaction("kv", "readwrite", { durability: "strict" });
    tx.objectStore("kv").put(value, key);
    tx.oncomplete = () => { d.close(); resolve(); };
    tx.onerror = () => { d.close(); reject(tx.error); };
  });
}
// forgetAll deletes everything but the memory of the rounds answered
// (which holds no rating): a server that serves the same plan again
// still gets no second answer from this browser.
async function forgetAll() {
  const memory = await kvGet("memory");
  await new Promise((resolve, reject) => {
    const r = indexedDB.deleteDatabase("privrec");
    r.onsuccess = () => resolve();
    r.onerror = () => reject(r.error);
    r.onblocked = () => resolve();
  });
  if (memory !== undefined) await kvPut("memory", memory);
}

async function saveRatings() {
  await kvPut("ratings", Array.from(page.ratings, ([id, value]) => ({ id, value })));
}

function scaleValues(sc) {
  const step = sc.step > 0 ? sc.step : 1, out = [];
  for (let v = sc.max; v >= sc.min - 1e-9; v -= step) out.push(Math.round(v * 100) / 100);
  return out;
}

// ratingSelect is the control that rates item index j.
function ratingSelect(j) {
  const title = page.plan.catalog.titles[j] || page.plan.catalog.itemIds[j];
  const sel = document.createElement("select");
  sel.setAttribute("aria-label", "Your rating of " + title);
  sel.dataset.item = String(j);
  const none = document.createElement("option");
  none.value = ""; none.textContent = "Rate…";
  sel.append(none);
  for (const v of scaleValues(page.plan.scale)) {
    const o = document.createElement("option");
    o.value = String(v); o.textContent = v + " ★";
    sel.append(o);
  }
  const id = page.plan.catalog.itemIds[j];
  if (page.ratings.has(id)) sel.value = String(page.ratings.get(id));
  sel.addEventListener("change", async () => {
    if (sel.value === "") page.ratings.delete(id); else page.ratings.set(id, Number(sel.value));
    await saveRatings();
    renderMine();
  });
  return sel;
}

function itemRow(j, extra) {
  const li = document.createElement("li");
  const span = document.createElement("span");
  span.textContent = page.plan.catalog.titles[j] || page.plan.catalog.itemIds[j];
  li.append(span, ratingSelect(j));
  if (extra) { li.append(extra); li.className = "with-action"; }
  return li;
}

let index = null; // item ID → catalog index
function renderMine() {
  const ul = $("mine");
  ul.replaceChildren();
  for (const id of page.ratings.keys()) {
    const j = index.get(id);
    if (j === undefined) continue;
    const rm = document.createElement("button");
    rm.type = "button"; rm.className = "link"; rm.textContent = "Remove";
    rm.setAttribute("aria-label", "Remove your rating of " + (page.plan.catalog.titles[j] || id));
    rm.addEventListener("click", async () => { page.ratings.delete(id); await saveRatings(); renderMine(); });
    ul.append(itemRow(j, rm));
  }
  $("count").textContent = String(page.ratings.size);
  // After a list from an interim release (a cohort run this browser is
  // spent in) Join fetches a newer one: it answers nothing more.
  $("join").disabled = page.ratings.size === 0 || (page.trained && !left()) || !page.ready;
}

function search(q) {
  const ul = $("results");
  ul.replaceChildren();
  q = q.trim().toLowerCase();
  if (!q) return;
  const titles = page.plan.catalog.titles;
  const most = 20;
  let n = 0;
  for (let j = 0; j < titles.length && n < most; j++) {
    if (titles[j].toLowerCase().includes(q)) { ul.append(itemRow(j)); n++; }
  }
  $("catalog-status").textContent = n === 0 ? "No movie matches “" + q + "”." :
    n === most ? "The first " + most + " matches shown; type more to narrow them." : plural(n, "match", "matches") + " shown.";
}

function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }

// describeRun says where the run is: st is the server's state
// ("enrolling", "running", "done"), with the clients enrolled and the
// number the run waits for.
function describeRun(st) {
  const joined = page.identity !== null;
  switch (st.state) {
    case "enrolling":
      return "The run has not started: " + (st.enrolled || 0) + " of the " + (st.minClients || 0) +
        " clients it waits for " + ((st.enrolled || 0) === 1 ? "is" : "are") + " enrolled." +
        (joined ? " This browser is one of them." : " Join to be one of them.");
    case "running":
      return "The run is under way with " + plural(st.enrolled || 0, "client", "clients") + "." +
        (joined ? "" : " It started before this browser joined: take part in the next run.");
    case "done":
      return "The run is over." + (joined || page.trained ? "" : " Take part in the next run.");
  }
  return "";
}

// describeSitOut says why the page sits out a round of a cohort run
// (webclient.SitOut): its participation limits, or not taken into the
// round's cohort.
function describeSitOut(o) {
  const trained = o.trained || [];
  const answered = trained.length === 0 ? "this browser has answered no training round yet" :
    "this browser answered " + (trained.length === 1 ? "round " : "rounds ") +
    trained.slice(0, -1).join(", ") + (trained.length > 1 ? " and " : "") + trained[trained.length - 1];
  let limits = o.maxRounds > 0 ? "the plan allows " + plural(o.maxRounds, "training round", "training rounds") : "";
  if (o.minGap > 1) limits += (limits ? ", " : "the plan wants training rounds ") + o.minGap + " apart";
  const why = o.why === "limits" ? "sitting it out by the plan's participation limits" : "not in this round's cohort";
  return "Round " + o.round + ": " + why + " (" + answered + (limits ? "; " + limits : "") + "). Waiting for the next round…";
}

// showStatus shows a status of the training under way: where the run
// is, or that the server does not answer.
function showStatus(text) {
  const st = JSON.parse(text);
  if (st.satOut) {
    $("train-status").textContent = describeSitOut(st.satOut);
    return;
  }
  if (st.unreachable) {
    const quiet = Math.round(st.silentSec || 0);
    $("run-status").textContent = (quiet < 1 ? "The server does not answer" : "The server has not answered for " + quiet + " s") +
      "; this page keeps trying for " + Math.max(0, Math.round(st.givesUpInSec)) + " s more.";
    return;
  }
  $("run-status").textContent = describeRun(st);
}

function renderPrivacy(sent) {
  const cfg = page.plan.config || {};
  $("eps-total").textContent = "ε = " + (cfg.eps || "1") + " at δ = " + (cfg.delta || "1e-6") +
    " for the whole run (an upper bound, for adding or removing all your ratings)";
  if (sent) {
    $("rounds").textContent = String(sent.maskedRounds + sent.emptyUploads);
    $("sent").textContent = plural(sent.maskedRounds, "masked vector", "masked vectors") + " and " +
      plural(sent.emptyUploads, "empty upload", "empty uploads") + " in " + plural(sent.calls, "call", "calls") +
      " (" + (sent.bytes / 1024).toFixed(1) + " KiB in all)";
    $("ratings-sent").textContent = sent.ratings === 0 && sent.ratedItems === 0 ? "none, ever" : "SOME: report this";
  }
  $("claim").textContent = "What this means: the run's model changes so little whether or not you take part that " +
    "nobody who sees it, the server included, can tell much about your ratings. Your ratings and the list of what you " +
    "rated never leave this browser; in each round it sends only a vector masked by secure aggregation, which the server " +
    "can add up with everyone else's but not read on its own. " + (page.trust ?
    "This browser runs the protocol against a server that lies, with an identity certified by the enrolment authority " +
    "at " + page.trust.authorityUrl + ": it holds if that authority is honest, at most a small fraction of the other " +
    "participants collude with the server, and this page (with the authority key it pins) came from the authority or " +
    "was pinned by you; a page the server itself sent could pin anything." :
    "INSECURE (the address says insecure=1, and no enrolment authority is pinned): this holds only if the server follows " +
    "the protocol and at most a small fraction of the other participants collude with it; a server that lies could " +
    "unmask this browser's vector.");
}

// left reports whether the page's list is from an interim release: it
// left a cohort run once its participation limits let it answer no
// later round, and the run goes on.
function left() { return !!(page.result && page.result.release); }

// releaseNote says which release a list is from, as privrec client
// --ratings does.
function releaseNote(rel) {
  return "Your list is from the release after round " + rel.round + ", which covers " + plural(rel.users, "user", "users") +
    ": this browser has answered every round its participation limits allow, and the run goes on " +
    "(press Join again later: it answers nothing more and shows a newer list).";
}

function renderRecs(res) {
  const ol = $("recs");
  ol.replaceChildren();
  if (!res) return;
  for (const r of res.recs || []) {
    const li = document.createElement("li");
    // Stars only where the run trained a rating model (dp-als); a
    // ranking model's (dp-ease's) scores are not ratings.
    li.textContent = r.title + (typeof r.rating === "number" ? " (predicted " + r.rating.toFixed(1) + " ★)" : "");
    ol.append(li);
  }
  $("recs-status").textContent = !(res.recs || []).length ? "Rate some movies to get recommendations." :
    res.popular ? "This run's private statistics could not carry personal taste at its ε (too few people for the " +
      "privacy budget), so this is the popular list, made private: the same for everyone, not yet about you. " +
      "No predicted stars are shown." :
    res.ranking ? "Ranked in this browser by " + res.method + " from the published item statistics and the movies you rated. " +
      "This run trained a ranking model only, so no predicted stars are shown." :
    "Computed in this browser from the published item factors and your own vector; the stars are the model's predicted rating.";
  if (res.release && (res.recs || []).length) $("recs-status").textContent = releaseNote(res.release) + " " + $("recs-status").textContent;
  if (res.epsTotal > 0) $("eps-so-far").textContent = "ε = " + res.epsTotal.toPrecision(3) +
    (res.release ? " (so far, by the release after round " + res.release.round + ")" : " (the run is done)");
}

// clearCode empties the code field and takes the code out of the
// address: once used (or forgotten) it is spent.
function clearCode() {
  $("code").value = "";
  if (new URLSearchParams(location.search).has("code")) history.replaceState(null, "", location.pathname);
}

// oneTab runs f while this tab holds the page's lock (the Web Locks
// API): one tab of the page takes part at a time, so two copies of the
// memory of the rounds answered never race.
async function oneTab(f) {
  if (!navigator.locks) return f();
  return navigator.locks.request("privrec-take-part", { ifAvailable: true }, async (lock) => {
    if (!lock) throw new Error("This page is taking part in another tab or window: close one of them.");
    return f();
  });
}

async function join() {
  const mine = ++page.runs;
  $("join").disabled = true;
  try {
    await oneTab(() => takePart(mine));
  } catch (err) {
    page.error = String(err && err.message || err);
    if (mine !== page.runs) return; // "Forget me" stopped it
    if (page.error.includes("lost the server")) {
      const quiet = /no answer for (\d+) s/.exec(page.error);
      $("run-status").textContent = "Lost the server: it may have stopped.";
      $("train-status").textContent = "Stopped taking part: the server has not answered for " + (quiet ? quiet[1] : "30") +
        " s. The rounds this browser answered count; press Join to try again once the server is back.";
    } else {
      $("train-status").textContent = "Could not take part: " + page.error;
    }
    $("join").disabled = false;
  }
}

// takePart enrols (once) and answers the run's rounds; join runs it in
// one tab at a time.
async function takePart(mine) {
  const client = window.privrecClient;
  // The memory as stored now (another tab may have answered rounds
  // since this one loaded).
  const memory = await kvGet("memory");
  const merr = client.remember(typeof memory === "string" ? memory : "", (text) => kvPut("memory", text));
  if (merr) throw new Error(merr);
  let ident = page.identity;
  if (!ident) {
    const code = $("code").value.trim();
    if (!code) throw new Error("Enter the enrolment code you were given.");
    $("train-status").textContent = "Enrolling…";
    const got = JSON.parse(await client.enroll(code));
    ident = { cred: got.cred, origin: location.origin };
    if (page.trust) {
      Object.assign(ident, { key: got.key, cert: got.cert || null, authority: page.trust });
      // Kept until the authority certified the key: the code is
      // spent at the aggregator, and certifying again needs it.
      if (got.certError) ident.code = code;
    }
    page.identity = ident;
    await kvPut("identity", ident);
    clearCode();
    if (got.certError) throw new Error(got.certError);
  }
  if (page.trust && !ident.cert && ident.code) {
    $("train-status").textContent = "Having this browser's identity certified…";
    const got = JSON.parse(await client.certify(ident.code, JSON.stringify(ident)));
    ident = Object.assign({}, ident, { cert: got.cert });
    delete ident.code;
    page.identity = ident;
    await kvPut("identity", ident);
  }
  const rs = [];
  for (const [id, value] of page.ratings) {
    const j = index.get(id);
    if (j !== undefined) rs.push({ item: j, value });
  }
  $("train-status").textContent = "Waiting for the next round…";
  const res = JSON.parse(await client.train(JSON.stringify(ident), JSON.stringify(rs), (text) => {
    if (mine !== page.runs) return;
    const e = JSON.parse(text);
    page.events.push(e);
    $("train-status").textContent = "Round " + e.round + " (" + e.phase + ") answered" +
      (e.masked ? " through secure aggregation with " + plural(e.clients, "participant", "participants") : "") +
      " in " + (e.tookMs / 1000).toFixed(2) + " s" + (e.err ? "; dropped out: " + e.err : "") + ".";
    if (e.epsSoFar > 0) $("eps-so-far").textContent = "ε = " + e.epsSoFar.toPrecision(3);
    renderPrivacy(e.sent);
  }, (text) => { if (mine === page.runs) showStatus(text); }));
  if (mine !== page.runs) return;
  page.result = res;
  await kvPut("result", res);
  renderPrivacy(JSON.parse(client.sent()));
  renderRecs(res);
  if (res.release) {
    $("train-status").textContent = "This browser has answered every round its participation limits allow " +
      "(training rounds " + (res.trained || []).join(", ") + "): your recommendations below are from the release after round " +
      res.release.round + ", which covers " + plural(res.release.users, "user", "users") + ".";
    $("run-status").textContent = "The run goes on without this browser.";
  } else {
    $("train-status").textContent = "The run is done: your recommendations are below.";
    $("run-status").textContent = "The run is over.";
  }
  page.trained = true; // last: the page shows everything by now
  renderMine();
}

// pinnedTrust is the enrolment authority this browser pins, if any: the
// one kept with its identity (pinned when it enrolled), else the one the
// address names (?authority=URL&authority-key=BASE64, from the link the
// authority handed out). An address that names another authority than
// the kept one is refused.
function pinnedTrust(params, ident) {
  const url = params.get("authority"), key = params.get("authority-key");
  const kept = ident && ident.authority || null;
  if (kept) {
    if ((url && url !== kept.authorityUrl) || (key && key !== kept.authorityKey)) {
      throw new Error("this address pins another enrolment authority than the one this browser enrolled with: refusing it");
    }
    return kept;
  }
  if (ident && (url || key)) {
    throw new Error("this browser enrolled without an enrolment authority; forget it to enrol with one");
  }
  if (!url && !key) return null;
  if (!url || !key) throw new Error("the address pins an enrolment authority without both its URL and its key");
  return { authorityUrl: url, authorityKey: key };
}

async function start() {
  const params = new URLSearchParams(location.search);
  const [hello, wasm] = await Promise.all([
    fetch(SERVICE + "Hello", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" }).then((r) => r.text()),
    WebAssembly.instantiateStreaming(fetch("client.wasm"), (window.go = new Go()).importObject),
  ]);
  page.plan = JSON.parse(hello);
  page.plan.catalog = page.plan.catalog || { itemIds: [], titles: [] };
  page.plan.catalog.titles = page.plan.catalog.titles || [];
  index = new Map(page.plan.catalog.itemIds.map((id, j) => [id, j]));
  const stored = (await kvGet("ratings")) || [];
  for (const r of stored) page.ratings.set(r.id, r.value);
  page.identity = (await kvGet("identity")) || null;
  page.trust = pinnedTrust(params, page.identity);
  // A code in the address enrols this browser once: with an identity
  // kept from before, it is spent.
  if (page.identity) clearCode(); else if (params.get("code")) $("code").value = params.get("code");
  const res = (await kvGet("result")) || null;
  await new Promise((resolve) => { window.privrecReady = resolve; go.run(wasm.instance); });
  // No authority pinned: the page takes part in no masked round unless
  // the address says insecure=1 (the protocol that holds only against a
  // server that follows it).
  page.insecure = !page.trust && params.get("insecure") === "1";
  const err = window.privrecClient.init(hello, page.trust ? JSON.stringify(page.trust) :
    page.insecure ? JSON.stringify({ insecure: true }) : "");
  if (err) throw new Error(err);
  // The memory of the rounds answered: the client saves it here, and
  // waits for the write, before any answer leaves.
  const memory = await kvGet("memory");
  const merr = window.privrecClient.remember(typeof memory === "string" ? memory : "", (text) => kvPut("memory", text));
  if (merr) throw new Error(merr);
  $("catalog-status").textContent = plural(page.plan.catalog.itemIds.length, "movie", "movies") + " in the catalog.";
  $("search").disabled = false;
  page.ready = true;
  if (res) { page.result = res; page.trained = true; renderRecs(res); }
  renderPrivacy(null);
  renderMine();
  $("run-status").textContent = describeRun({ state: String(page.plan.state || "").replace("RUN_STATE_", "").toLowerCase(),
    enrolled: page.plan.enrolled, minClients: page.plan.minClients });
}

$("search").addEventListener("input", (e) => search(e.target.value));
$("join").addEventListener("click", join);
$("forget").addEventListener("click", async () => {
  page.runs++;
  if (window.privrecClient) window.privrecClient.stop();
  await forgetAll();
  page.ratings.clear(); page.identity = null; page.result = null; page.trained = false; page.events = [];
  clearCode();
  renderMine(); renderRecs(null);
  $("recs-status").textContent = "Computed in this browser when the run is done.";
  $("eps-so-far").textContent = "0";
  $("rounds").textContent = "0";
  $("sent").textContent = "nothing yet";
  $("train-status").textContent = "";
  $("forget-status").textContent = "Your ratings, recommendations and identity are deleted from this browser. " +
    "It keeps only which rounds it answered (no rating), so that no server gets a second answer to them. " +
    "To take part in a run again you need a new enrolment code.";
});
start().catch((err) => {
  page.error = String(err && err.message || err);
  $("catalog-status").textContent = "The page could not start: " + page.error;
});
