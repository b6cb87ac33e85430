// The REST API as the page calls it: the key from session storage, sent as a Bearer token.

const STORAGE_KEY = "memstrata.inspector.key";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// The key kept for this tab, if any.
export function storedKey() {
  return sessionStorage.getItem(STORAGE_KEY);
}

export function keepKey(key) {
  sessionStorage.setItem(STORAGE_KEY, key);
}

export function dropKey() {
  sessionStorage.removeItem(STORAGE_KEY);
}

// A key handed over in the address's fragment (memstrata ui), taken out of the address at once.
// The fragment never reaches a server or a Referer header.
export function takeKeyFromAddress() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const key = fragment.get("key");
  if (key) {
    keepKey(key);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return key;
}

// Calls the API; resolves to the JSON answer (null for 204), rejects with an ApiError.
export async function call(method, path, { query = {}, body } = {}) {
  const parameters = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") parameters.set(name, String(value));
  }
  const address = "v1/" + path + (parameters.toString() ? "?" + parameters.toString() : "");
  const headers = { Authorization: "Bearer " + (storedKey() || "") };
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(address, init);
  if (response.status === 204) return null;
  const answer = await response.json().catch(() => null);
  if (!response.ok) {
    const error = answer && answer.error ? answer.error : { code: "http_" + response.status, message: response.statusText };
    throw new ApiError(response.status, error.code, error.message);
  }
  return answer;
}

// The path segment for an id (ids may hold "/", which the memory routes read as part of the id).
export function segment(id) {
  return id.split("/").map(encodeURIComponent).join("/");
}
