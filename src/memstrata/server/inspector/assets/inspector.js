// The inspector's wiring: sign in with a key, pick a user, and read or delete its memories through /v1.

import { ApiError, call, dropKey, keepKey, segment, storedKey, takeKeyFromAddress } from "./api.js";
import { el, number, show, when } from "./dom.js";
import { draw } from "./graph.js";
import { tierSections } from "./tiers.js";

const PAGE = 20;
const DERIVED_TIERS = ["longterm", "scene", "midterm", "consolidation"];
const $ = (id) => document.getElementById(id);

const state = { user: null, session: null, offset: 0, users: [], tab: "timeline" };

// Every failure lands in the status line, as text.
async function guarded(work) {
  show($("status"));
  try {
    return await work();
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403) && error.code !== "access_denied") {
      signOut(error.message);
      return undefined;
    }
    show($("status"), error.message || String(error));
    return undefined;
  }
}

// -- signing in ---------------------------------------------------------------------------------

async function open() {
  try {
    const version = await call("GET", "version");
    const tenant = version.tenant === "*" ? "the whole data directory (memstrata ui)" : `tenant ${version.tenant}`;
    show($("who"), `${tenant} · memstrata ${version.version} · ${version.embedder}`);
  } catch (error) {
    signOut(error.message);
    return;
  }
  $("login").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  await loadUsers();
}

function signOut(message = "") {
  dropKey();
  Object.assign(state, { user: null, session: null, offset: 0, users: [] });
  clearUser("Pick a user");
  show($("users"));
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("login").hidden = false;
  show($("who"));
  show($("login-error"), message);
}

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = $("key-input").value.trim();
  $("key-input").value = "";
  if (!key) return;
  keepKey(key);
  open();
});
$("sign-out").addEventListener("click", () => signOut());

// -- users and sessions -------------------------------------------------------------------------

async function loadUsers() {
  const answer = await guarded(() => call("GET", "users"));
  if (!answer) return;
  state.users = answer.users;
  renderUsers();
}

function renderUsers() {
  const filter = $("user-filter").value.trim().toLowerCase();
  const shown = state.users.filter((user) => user.toLowerCase().includes(filter));
  if (!state.users.length) {
    show($("users"), el("li", { class: "muted" }, "no users with memories"));
    return;
  }
  show(
    $("users"),
    shown.map((user) =>
      el("li", {}, el("button", { type: "button", class: user === state.user ? "picked" : "", "data-user": user, onclick: () => pickUser(user) }, user)),
    ),
  );
}

$("user-filter").addEventListener("input", renderUsers);

async function pickUser(user) {
  Object.assign(state, { user, session: null, offset: 0 });
  show($("user-title"), user);
  $("forget-user").disabled = false;
  renderUsers();
  await loadSessions();
  await showTab(state.tab);
}

async function loadSessions() {
  const answer = await guarded(() => call("GET", "sessions", { query: { user_id: state.user } }));
  if (!answer) return;
  const all = el("li", {}, el("button", { type: "button", class: state.session === null ? "picked" : "", "data-session": "", onclick: () => pickSession(null) }, "all sessions"));
  const items = answer.sessions.map((one) => {
    const label = [el("span", {}, one.session_id ?? "(no session)"), el("span", { class: "muted small" }, ` ${one.turns} turns · ${when(one.last_at)}`)];
    if (one.session_id === null) return el("li", { class: "muted" }, label);
    return el("li", {}, el("button", { type: "button", class: state.session === one.session_id ? "picked" : "", "data-session": one.session_id, onclick: () => pickSession(one.session_id) }, label));
  });
  if (!answer.is_complete) items.push(el("li", { class: "muted small" }, "counted over the newest turns only"));
  show($("sessions"), all, items);
}

async function pickSession(session) {
  Object.assign(state, { session, offset: 0 });
  await loadSessions();
  await showTab("timeline");
}

// -- tabs ---------------------------------------------------------------------------------------

for (const button of document.querySelectorAll(".tabs button")) {
  button.addEventListener("click", () => showTab(button.dataset.tab));
}

async function showTab(name) {
  state.tab = name;
  for (const button of document.querySelectorAll(".tabs button")) button.classList.toggle("active", button.dataset.tab === name);
  for (const section of document.querySelectorAll(".tab")) section.hidden = section.id !== "tab-" + name;
  if (!state.user) return;
  if (name === "timeline") await loadTimeline();
  if (name === "tiers") await loadTiers();
  if (name === "graph") await loadGraph();
}

// -- timeline -----------------------------------------------------------------------------------

async function loadTimeline() {
  const query = { user_id: state.user, session_id: state.session, limit: PAGE, offset: state.offset, newest_first: true };
  const answer = await guarded(() => call("GET", "memories", { query }));
  if (!answer) return;
  if (!answer.memories.length && state.offset > 0) {
    // The page emptied (its last memory was deleted): show the one before it.
    state.offset = Math.max(0, state.offset - PAGE);
    await loadTimeline();
    return;
  }
  const turns = answer.memories.map((turn) =>
    el(
      "li",
      { class: `turn role-${turn.role}`, "data-id": turn.id },
      el("div", { class: "turn-head" },
        el("span", { class: "badge" }, turn.role),
        el("span", { class: "muted" }, `${when(turn.created_at)} · ${turn.session_id ?? "no session"}${turn.agent_id ? " · agent " + turn.agent_id : ""}`),
        el("code", { class: "muted small" }, turn.id),
        el("button", { type: "button", class: "danger small", onclick: () => deleteTurn(turn) }, "Delete…"),
      ),
      el("p", { class: "content" }, turn.content),
    ),
  );
  show($("turns"), turns.length ? turns : el("li", { class: "muted" }, "no memories here"));
  const last = state.offset + answer.memories.length;
  show($("page-info"), answer.memories.length ? `newest first · ${state.offset + 1}–${last}` : "");
  $("newer").disabled = state.offset === 0;
  $("older").disabled = answer.next_offset === null;
}

$("newer").addEventListener("click", () => {
  state.offset = Math.max(0, state.offset - PAGE);
  loadTimeline();
});
$("older").addEventListener("click", () => {
  state.offset += PAGE;
  loadTimeline();
});

// -- tiers --------------------------------------------------------------------------------------

async function loadTiers() {
  const found = await guarded(() =>
    Promise.all([
      call("GET", "inspect", { query: { user_id: state.user, limit: 100 } }),
      call("GET", "cells", { query: { user_id: state.user, include_superseded: true, limit: 500 } }),
    ]),
  );
  if (!found) return;
  const [report, cells] = found;
  const user = state.user;
  const turnsOf = (segment) =>
    guarded(async () => (await call("GET", `segments/${encodeURIComponent(segment.id)}/turns`, { query: { user_id: user } })).turns);
  show($("tiers"), tierSections(report, cells.cells, turnsOf));
}

// -- graph --------------------------------------------------------------------------------------

async function loadGraph() {
  let query = $("graph-query").value.trim();
  if (!query) {
    const report = await guarded(() => call("GET", "inspect", { query: { user_id: state.user, limit: 40 } }));
    if (!report) return;
    query = report.entities.map((entity) => entity.name).join(" ");
  }
  if (!query) {
    $("graph").replaceChildren();
    show($("graph-note"), "No entities yet.");
    return;
  }
  const graph = await guarded(() => call("GET", "graph", { query: { user_id: state.user, query, limit: 60 } }));
  if (!graph) return;
  draw($("graph"), graph);
  show($("graph-note"), `${graph.nodes.length} entities, ${graph.edges.length} edges: a node's size is its mentions, an edge's width how often the two were said together.`);
}

$("graph-form").addEventListener("submit", (event) => {
  event.preventDefault();
  if (state.user) loadGraph();
});

// -- search and context -------------------------------------------------------------------------

$("search-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!state.user) return;
  const body = {
    query: $("search-query").value,
    user_id: state.user,
    mode: $("search-mode").value,
    limit: Number($("search-limit").value) || 10,
    tiers: $("search-tiers").checked ? DERIVED_TIERS : [],
  };
  const answer = await guarded(() => call("POST", "search", { body }));
  if (!answer) return;
  const rows = answer.hits.map((hit, position) =>
    el("tr", { class: "hit", "data-id": hit.id },
      el("td", {}, String(position + 1)),
      el("td", {}, number(hit.score)),
      el("td", {}, Object.entries(hit.ranks).map(([retriever, rank]) => el("span", { class: "chip" }, `${retriever} #${rank}`))),
      el("td", {}, hit.tier),
      el("td", {}, el("p", { class: "content" }, hit.content), hit.turn ? el("span", { class: "muted small" }, `${when(hit.turn.created_at)} · ${hit.turn.session_id ?? "no session"}`) : null),
    ),
  );
  $("hits").hidden = false;
  show($("hits").tBodies[0], rows.length ? rows : el("tr", {}, el("td", { colspan: 5, class: "muted" }, "no hits")));
});

$("context-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!state.user) return;
  const query = $("search-query").value;
  if (!query.trim()) {
    show($("status"), "Type a query in the search box first: the context is built for it.");
    return;
  }
  const body = { query, user_id: state.user, token_budget: Number($("context-budget").value) || 300 };
  const context = await guarded(() => call("POST", "context", { body }));
  if (!context) return;
  const badge = $("context-tokens");
  badge.hidden = false;
  show(badge, `${context.tokens} / ${context.token_budget} tokens`);
  show(
    $("context"),
    el("pre", { class: "context-text" }, context.text),
    el("p", { class: "muted small" }, `${context.items.length} items, ${context.omitted} left out for the budget`),
    el("ul", { class: "items" }, context.items.map((item) =>
      el("li", {}, el("span", { class: "chip" }, `${item.kind} · ${item.tier} · ${item.tokens} tokens · score ${number(item.score)}${item.is_abridged ? " · abridged" : ""}`)),
    )),
  );
});

// -- deleting -----------------------------------------------------------------------------------

// Asks before anything is deleted; with `expected`, the user must type it.
function confirmed({ title, text, expected = null, action }) {
  const dialog = $("confirm");
  show($("confirm-title"), title);
  show($("confirm-text"), text);
  $("confirm-typed-label").hidden = expected === null;
  show($("confirm-expected"), expected ?? "");
  $("confirm-typed").value = "";
  show($("confirm-ok"), action);
  const ok = $("confirm-ok");
  const sync = () => { ok.disabled = expected !== null && $("confirm-typed").value !== expected; };
  sync();
  $("confirm-typed").oninput = sync;
  return new Promise((resolve) => {
    ok.onclick = () => { dialog.close("ok"); };
    $("confirm-cancel").onclick = () => dialog.close("cancel");
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

async function deleteTurn(turn) {
  const preview = turn.content.length > 160 ? turn.content.slice(0, 160) + "…" : turn.content;
  const yes = await confirmed({ title: "Delete this memory?", text: `“${preview}” will be deleted with its index entries. This cannot be undone.`, action: "Delete" });
  if (!yes) return;
  const done = await guarded(async () => {
    await call("DELETE", "memories/" + segment(turn.id), { query: { user_id: state.user } });
    return true;
  });
  if (done) {
    await loadSessions();
    await loadTimeline();
  }
}

$("forget-user").addEventListener("click", async () => {
  const user = state.user;
  if (!user) return;
  const yes = await confirmed({
    title: `Forget ${user}?`,
    text: "Every memory of this user is deleted: turns, facts, segments, patterns, entities and indexes. This cannot be undone.",
    expected: user,
    action: "Forget user",
  });
  if (!yes) return;
  const deletion = await guarded(() => call("POST", "forget", { body: { user_id: user } }));
  if (!deletion) return;
  Object.assign(state, { user: null, session: null, offset: 0 });
  clearUser(`Forgot ${user}: ${deletion.turns} turns deleted`);
  await loadUsers();
});

// Empties every view of the user shown last (after a forget, or when the key changes).
function clearUser(title) {
  show($("user-title"), title);
  $("forget-user").disabled = true;
  show($("sessions"), el("li", { class: "muted" }, "pick a user"));
  for (const id of ["turns", "tiers", "context", "page-info", "graph-note", "status"]) show($(id));
  show($("hits").tBodies[0]);
  $("hits").hidden = true;
  $("context-tokens").hidden = true;
  $("graph").replaceChildren();
  $("newer").disabled = true;
  $("older").disabled = true;
}

// -- start --------------------------------------------------------------------------------------

takeKeyFromAddress();
if (storedKey()) open();
// The address of `memstrata ui` opened in a tab that already shows the page changes only its fragment.
window.addEventListener("hashchange", () => {
  if (takeKeyFromAddress()) open();
});
