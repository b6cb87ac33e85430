// Builds the page from data without ever parsing it as markup: memory text is untrusted.

const SVG = "http://www.w3.org/2000/svg";

// An element with attributes and children; strings become text nodes, never HTML.
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  return fill(node, attributes, children);
}

// The same for SVG elements.
export function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  return fill(node, attributes, children);
}

function fill(node, attributes, children) {
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replaces a node's children.
export function show(node, ...children) {
  node.replaceChildren();
  return fill(node, {}, children);
}

// A timestamp as UTC minutes, the same on every machine.
export function when(iso) {
  if (!iso) return "";
  return new Date(iso).toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

// A number with at most four significant decimals.
export function number(value) {
  return Number.isInteger(value) ? String(value) : Number(value).toFixed(4);
}
