// The tiers of one user's memory: counts, profile, facts with their superseded history, segments, patterns,
// consolidations. Every value is set as text.

import { el, number, when } from "./dom.js";

// The tier sections for an inspect report and the user's cells (superseded ones included); `turnsOf(segment)`
// resolves to the turns filed in a segment.
export function tierSections(report, cells, turnsOf) {
  return [
    section("Counts", counts(report)),
    section("Profile", profile(report.profile)),
    section("Facts (long-term cells) and what they superseded", facts(cells)),
    section("Mid-term segments, by heat", segments(report.segments, turnsOf)),
    section("Patterns", patterns(report.patterns)),
    section("Consolidations", consolidations(report.consolidations)),
  ];
}

function section(title, body) {
  return el("section", { class: "tier", "data-tier": title.split(" ")[0].toLowerCase() }, el("h3", {}, title), body);
}

function empty(text) {
  return el("p", { class: "muted" }, text);
}

function counts(report) {
  const items = Object.entries(report.counts).map(([name, value]) =>
    el("li", {}, el("span", { class: "count" }, String(value)), " ", name.replaceAll("_", " ")),
  );
  items.push(el("li", {}, el("span", { class: "count" }, String(report.pending_jobs)), " pending jobs"));
  items.push(el("li", { class: report.failed_jobs ? "warn" : "" }, el("span", { class: "count" }, String(report.failed_jobs)), " failed jobs"));
  return el("ul", { class: "counts" }, items);
}

function profile(traits) {
  const entries = Object.entries(traits);
  if (!entries.length) return empty("No stable traits yet.");
  return el("dl", { class: "profile" }, entries.map(([key, value]) => [el("dt", {}, key), el("dd", {}, value)]));
}

function facts(cells) {
  if (!cells.length) return empty("No facts extracted yet.");
  // One row group per (subject, attribute): the current value first, then what it replaced, newest first.
  const groups = new Map();
  for (const cell of cells) {
    const key = cell.subject + "\u0000" + cell.attribute;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(cell);
  }
  const rows = [];
  for (const group of groups.values()) {
    group.sort((a, b) => Number(b.is_current) - Number(a.is_current) || b.valid_from.localeCompare(a.valid_from));
    for (const cell of group) {
      rows.push(
        el(
          "tr",
          { class: cell.is_current ? "current" : "superseded", "data-cell": cell.id },
          el("td", {}, cell.subject),
          el("td", {}, cell.attribute),
          el("td", { class: "value" }, cell.value),
          el("td", {}, cell.kind),
          el("td", {}, number(cell.salience)),
          el("td", {}, when(cell.valid_from)),
          el("td", {}, cell.is_current ? "current" : `until ${when(cell.valid_to)}`),
        ),
      );
    }
  }
  return el(
    "table",
    { class: "grid" },
    el("thead", {}, el("tr", {}, ["subject", "attribute", "value", "kind", "salience", "valid from", "status"].map((name) => el("th", {}, name)))),
    el("tbody", {}, rows),
  );
}

function segments(found, turnsOf) {
  if (!found.length) return empty("No mid-term segments: turns are still in working memory.");
  const hottest = Math.max(1e-9, ...found.map((segment) => segment.heat));
  const expand = async (segment, button, list) => {
    button.disabled = true;
    const turns = await turnsOf(segment);
    if (!turns) {
      button.disabled = false;
      return;
    }
    list.replaceChildren(...turns.map((turn) => el("li", {}, el("span", { class: "badge" }, turn.role), " ", turn.content)));
    button.hidden = true;
  };
  return el(
    "ul",
    { class: "segments" },
    found.map((segment) => {
      const list = el("ul", { class: "segment-turns" });
      const button = el("button", { type: "button", class: "small" }, "Show turns");
      button.addEventListener("click", () => expand(segment, button, list));
      return el(
        "li",
        { "data-segment": segment.id },
        el("div", { class: "segment-head" },
          el("meter", { min: 0, max: hottest, value: segment.heat, title: `heat ${number(segment.heat)}` }),
          el("span", { class: "badge" }, `heat ${number(segment.heat)}`),
          el("span", { class: "muted" }, `${segment.state} · ${segment.turn_count} turns · ${segment.visits} visits · ${when(segment.last_activity)}`),
        ),
        el("p", {}, segment.summary),
        el("p", { class: "muted" }, segment.keywords.join(", ")),
        button,
        list,
      );
    }),
  );
}

function patterns(found) {
  if (!found.length) return empty("No recurring patterns yet.");
  return el(
    "table",
    { class: "grid" },
    el("thead", {}, el("tr", {}, ["pattern", "seen", "score", "last seen", "evidence"].map((name) => el("th", {}, name)))),
    el("tbody", {}, found.map((pattern) =>
      el("tr", {},
        el("td", {}, pattern.description),
        el("td", {}, `${pattern.count}×`),
        el("td", {}, number(pattern.score)),
        el("td", {}, when(pattern.last_seen)),
        el("td", { class: "muted" }, pattern.evidence),
      ),
    )),
  );
}

function consolidations(found) {
  if (!found.length) return empty("No consolidations yet (memstrata consolidate, or POST /v1/consolidate).");
  return el(
    "ul",
    { class: "consolidations" },
    found.map((item) =>
      el("li", {},
        el("div", { class: "segment-head" },
          el("span", { class: "badge" }, `TES ${number(item.tes)}`),
          el("span", { class: "muted" },
            `compression ${number(item.compression_ratio)} · entities kept ${number(item.entity_preservation)} · ` +
              `${item.source_turn_ids.length} turns · ${when(item.created_at)}`),
        ),
        el("p", { class: "summary" }, item.summary),
      ),
    ),
  );
}
