// The REST client. The login cookie carries the token; page JavaScript never sees it.
// Every write carries the CSRF header the API requires for cookie-authenticated calls.

export const CSRF_HEADER = "X-Agentboard";

export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message || `request failed (${status})`);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

const listeners = new Set();

/** Called with the ApiError whenever the server answers 401 (logged out / token revoked). */
export function onUnauthorized(fn) {
  listeners.add(fn);
}

export async function request(method, path, { query, body } = {}) {
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v === undefined || v === null || v === "" || v === false) continue;
      params.set(k, v === true ? "true" : String(v));
    }
    const qs = params.toString();
    if (qs) url += (url.includes("?") ? "&" : "?") + qs;
  }
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers[CSRF_HEADER] = "1";
  const init = { method, headers, credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(url, init);
  } catch (err) {
    throw new ApiError(0, "network", "the server cannot be reached");
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  if (!resp.ok) {
    const err = data && typeof data === "object" && data.error ? data.error : {};
    let message = err.message || (typeof data === "string" && data) || resp.statusText;
    if (!err.message && data && Array.isArray(data.detail)) {
      message = data.detail.map((d) => `${(d.loc || []).slice(1).join(".")}: ${d.msg}`).join("; ");
    } else if (!err.message && data && typeof data.detail === "string") {
      message = data.detail;
    }
    const error = new ApiError(resp.status, err.code || String(resp.status), message, data);
    if (resp.status === 401) listeners.forEach((fn) => fn(error));
    throw error;
  }
  return data;
}

export const api = {
  get: (path, query) => request("GET", path, { query }),
  post: (path, body, query) => request("POST", path, { body: body ?? {}, query }),
  patch: (path, body, query) => request("PATCH", path, { body, query }),
  del: (path, query) => request("DELETE", path, { query }),
};
