// The entity graph: a small force-directed layout (springs on edges, repulsion between nodes), drawn as SVG.

import { svg } from "./dom.js";

const ROUNDS = 400;
const GRAVITY = 0.3;
const REPULSION = 120;
const SPRING_LENGTH = 150;
const STIFFNESS = 0.5;
const MARGIN_X = 80;
const MARGIN_Y = 50;

// Positions for the nodes inside width × height: springs pull linked entities to a rest length, every pair
// repels, and a pull to the centre keeps separate groups near. Deterministic (nodes start on a circle), so a
// graph looks the same each time it is drawn.
export function layout(nodes, edges, width, height) {
  const count = nodes.length;
  const points = nodes.map((node, position) => {
    const angle = (2 * Math.PI * position) / Math.max(count, 1);
    return { x: width / 2 + (width / 3) * Math.cos(angle), y: height / 2 + (height / 3) * Math.sin(angle) };
  });
  const index = new Map(nodes.map((node, position) => [node.name, position]));
  const links = edges
    .filter((edge) => index.has(edge.source) && index.has(edge.target) && edge.source !== edge.target)
    .map((edge) => [index.get(edge.source), index.get(edge.target), edge.weight]);
  let heat = SPRING_LENGTH;
  for (let round = 0; round < ROUNDS; round += 1) {
    const moves = points.map(() => ({ x: 0, y: 0 }));
    const push = (a, dx, dy, force, distance) => {
      moves[a].x += (dx / distance) * force;
      moves[a].y += (dy / distance) * force;
    };
    for (let a = 0; a < count; a += 1) {
      for (let b = a + 1; b < count; b += 1) {
        const dx = points[a].x - points[b].x || 0.01 * (a + 1);
        const dy = points[a].y - points[b].y || 0.01 * (b + 1);
        const distance = Math.max(Math.hypot(dx, dy), 0.01);
        const force = (REPULSION * REPULSION) / distance;
        push(a, dx, dy, force, distance);
        push(b, -dx, -dy, force, distance);
      }
    }
    for (const [a, b, weight] of links) {
      const dx = points[b].x - points[a].x;
      const dy = points[b].y - points[a].y;
      const distance = Math.max(Math.hypot(dx, dy), 0.01);
      // Heavier edges pull harder: entities said together often sit close.
      const force = (distance - SPRING_LENGTH) * STIFFNESS * (1 + Math.log(weight));
      push(a, dx, dy, force, distance);
      push(b, -dx, -dy, force, distance);
    }
    for (let a = 0; a < count; a += 1) {
      moves[a].x += (width / 2 - points[a].x) * GRAVITY;
      moves[a].y += (height / 2 - points[a].y) * GRAVITY;
      const length = Math.max(Math.hypot(moves[a].x, moves[a].y), 0.01);
      const step = Math.min(length, heat);
      points[a].x += (moves[a].x / length) * step;
      points[a].y += (moves[a].y / length) * step;
    }
    heat = Math.max(heat * 0.98, 0.5);
  }
  return fit(points, width, height);
}

// The points scaled alike on both axes and centred, so the drawing fills the box with room for labels.
function fit(points, width, height) {
  if (!points.length) return points;
  const xs = points.map((point) => point.x);
  const ys = points.map((point) => point.y);
  const [left, right, top, bottom] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const room = { x: width - 2 * MARGIN_X, y: height - 2 * MARGIN_Y };
  const scale = Math.min(room.x / Math.max(right - left, 1), room.y / Math.max(bottom - top, 1), 1.5);
  const middle = { x: (left + right) / 2, y: (top + bottom) / 2 };
  return points.map((point) => ({
    x: width / 2 + (point.x - middle.x) * scale,
    y: height / 2 + (point.y - middle.y) * scale,
  }));
}

// Draws nodes (sized by mentions, coloured by kind) and edges (thickness and label by weight) into an <svg>.
export function draw(target, graph) {
  const box = target.viewBox.baseVal;
  const points = layout(graph.nodes, graph.edges, box.width, box.height);
  const at = new Map(graph.nodes.map((node, position) => [node.name, points[position]]));
  const heaviest = Math.max(1, ...graph.edges.map((edge) => edge.weight));
  const mostMentioned = Math.max(1, ...graph.nodes.map((node) => node.mentions));
  const edges = graph.edges
    .filter((edge) => at.has(edge.source) && at.has(edge.target))
    .map((edge) => {
      const from = at.get(edge.source);
      const to = at.get(edge.target);
      return svg(
        "g",
        { class: "edge", "data-source": edge.source, "data-target": edge.target },
        svg("line", { x1: from.x, y1: from.y, x2: to.x, y2: to.y, "stroke-width": 1 + (4 * edge.weight) / heaviest }),
        svg("text", { x: (from.x + to.x) / 2, y: (from.y + to.y) / 2 - 4, class: "weight" }, String(edge.weight)),
        svg("title", {}, `${edge.source} — ${edge.target}: said together ${edge.weight}×`),
      );
    });
  const nodes = graph.nodes.map((node) => {
    const point = at.get(node.name);
    const radius = 8 + 14 * Math.sqrt(node.mentions / mostMentioned);
    return svg(
      "g",
      { class: `node kind-${kindClass(node.kind)}`, "data-name": node.name },
      svg("circle", { cx: point.x, cy: point.y, r: radius }),
      svg("text", { x: point.x, y: point.y + radius + 14, class: "label" }, node.name),
      svg("title", {}, `${node.name} (${node.kind}): ${node.mentions} mention(s)`),
    );
  });
  target.replaceChildren(svg("g", { class: "edges" }, edges), svg("g", { class: "nodes" }, nodes));
}

function kindClass(kind) {
  return ["person", "place", "organization", "date", "other"].includes(kind) ? kind : "other";
}
