// plnt UI: the live parts of the server-rendered pages. No build step, no dependencies.
// Streams: Server-Sent Events from the UI server (the API's watches, relayed), each message
// {"replace"|"prepend": {id: html}, "clear": [id], "error": text}. Actions: POST with the
// page's CSRF token; the API's message is shown in the banner whether it worked or not.

const csrf = document.querySelector('meta[name="csrf-token"]')?.content ?? "";
const banner = document.getElementById("banner");

function say(text, kind = "info") {
  if (!banner) return;
  banner.textContent = text;
  banner.className = `banner ${kind}`;
  banner.hidden = false;
}

function parse(html) {
  const template = document.createElement("template");
  // Rows need a table context to be parsed as rows.
  const inTable = /^\s*<tr[\s>]/.test(html);
  template.innerHTML = inTable ? `<table><tbody>${html}</tbody></table>` : html;
  return inTable ? template.content.querySelector("tbody").childNodes : template.content.childNodes;
}

// A live update changes the page in place, node by node, where the new HTML has the same
// shape: an element a user is clicking stays the same element. Replacing a whole table
// body on each watch event would detach the link under the pointer between mousedown and
// mouseup, and the click would be lost (no navigation).
function sameShape(old, fresh) {
  return old.nodeType === fresh.nodeType && old.nodeName === fresh.nodeName
    && (old.nodeType !== Node.ELEMENT_NODE || old.id === fresh.id);
}

function morph(old, fresh) {
  if (old.nodeType !== Node.ELEMENT_NODE) {
    if (old.nodeValue !== fresh.nodeValue) old.nodeValue = fresh.nodeValue;
    return;
  }
  if (old.isEqualNode(fresh)) return;
  for (const { name } of [...old.attributes]) if (!fresh.hasAttribute(name)) old.removeAttribute(name);
  for (const { name, value } of fresh.attributes) if (old.getAttribute(name) !== value) old.setAttribute(name, value);
  morphChildren(old, fresh.childNodes);
}

function morphChildren(target, freshNodes) {
  const fresh = [...freshNodes];
  const old = [...target.childNodes];
  if (old.length !== fresh.length || !old.every((node, i) => sameShape(node, fresh[i]))) {
    target.replaceChildren(...fresh);
    return;
  }
  old.forEach((node, i) => morph(node, fresh[i]));
}

function follow(element) {
  const source = new EventSource(element.dataset.live);
  source.onopen = () => { element.dataset.following = "open"; };
  source.onmessage = (event) => {
    const message = JSON.parse(event.data);
    for (const id of message.clear ?? []) document.getElementById(id)?.replaceChildren();
    for (const [id, html] of Object.entries(message.replace ?? {})) {
      const target = document.getElementById(id);
      if (target) morphChildren(target, parse(html));
    }
    for (const [id, html] of Object.entries(message.prepend ?? {})) {
      const target = document.getElementById(id);
      if (target) target.prepend(...parse(html));
    }
    if (message.error) say(message.error, "error");
    applyFilters();
    document.dispatchEvent(new CustomEvent("plnt:updated"));
  };
}

async function post(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body ?? {}),
    credentials: "same-origin",
  });
  let answer;
  try {
    answer = await response.json();
  } catch {
    answer = { error: { code: response.status, message: await response.text().catch(() => "") || `HTTP ${response.status}` } };
  }
  return { ok: response.ok, answer };
}

async function act(button) {
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  button.disabled = true;
  try {
    const { ok, answer } = await post(button.dataset.action, JSON.parse(button.dataset.body ?? "{}"));
    if (ok) {
      say(answer.message, "ok");
      if (button.dataset.then) window.location.assign(button.dataset.then);
    } else {
      say(`${answer.error.code}: ${answer.error.message}`, "error");
    }
  } catch (error) {
    say(`the UI server did not answer: ${error}`, "error");
  } finally {
    button.disabled = false;
  }
}

function applyFilters() {
  const revision = document.querySelector("[data-filter-revision]")?.value ?? "";
  const errorsOnly = document.querySelector("[data-filter-errors]")?.checked ?? false;
  for (const row of document.querySelectorAll("tr.invocation")) {
    row.hidden = (revision && row.dataset.revision !== revision) || (errorsOnly && row.dataset.error !== "true");
  }
}

function formValues(form) {
  const values = {};
  for (const element of form.elements) {
    if (!element.name) continue;
    if (element.type === "checkbox") values[element.name] = element.checked;
    else values[element.name] = element.value;
  }
  return values;
}

async function invoke(form) {
  for (const p of form.querySelectorAll("[data-error-for]")) { p.hidden = true; p.textContent = ""; }
  const output = document.querySelector("[data-invoke-output]");
  const meta = document.querySelector("[data-invoke-meta]");
  const trace = document.querySelector("[data-invoke-trace]");
  output.textContent = "…";
  trace.replaceChildren();
  const { ok, answer } = await post(form.dataset.invoke, { values: formValues(form) });
  if (!ok) {
    output.textContent = "";
    meta.textContent = "";
    say(`${answer.error.code}: ${answer.error.message}`, "error");
    for (const [field, message] of Object.entries(answer.error.fields ?? {})) {
      const slot = form.querySelector(`[data-error-for="${CSS.escape(field)}"]`);
      if (slot) { slot.textContent = message; slot.hidden = false; }
    }
    return;
  }
  banner.hidden = true;
  output.textContent = typeof answer.output === "string" ? answer.output : JSON.stringify(answer.output, null, 2);
  const hops = (answer.timings ?? []).map((t) => `${t.name} ${t.ms?.toFixed(1)} ms`).join(" · ");
  meta.textContent = `revision ${answer.revision} · cache ${answer.cache}${hops ? " · " + hops : ""}`;
  // Rendered by the UI server with the Invocation page's own template (autoescaped).
  trace.replaceChildren(...parse(answer.traceHtml ?? ""));
}

async function chat(form) {
  const log = document.querySelector("[data-chat-log]");
  const input = form.elements.message;
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  const mine = document.createElement("p");
  mine.className = "me";
  mine.textContent = text;
  const reply = document.createElement("p");
  reply.className = "bot";
  log.append(mine, reply);
  const response = await fetch(form.dataset.chat, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify({ message: text, input: form.dataset.chatInput }),
  });
  if (!response.ok) {
    const answer = await response.json().catch(() => ({ error: { message: `HTTP ${response.status}` } }));
    reply.textContent = answer.error.message;
    reply.classList.add("failed");
    return;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  let streamed = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    pending += decoder.decode(value, { stream: true });
    const lines = pending.split("\n");
    pending = lines.pop();
    for (const line of lines) {
      if (!line.trim()) continue;
      const item = JSON.parse(line);
      if (item.type === "delta") { reply.textContent += item.content ?? ""; streamed = true; }
      else if (item.type === "result" && !streamed) {
        const out = item.output;
        reply.textContent = typeof out === "string" ? out : JSON.stringify(out);
      } else if (item.type === "error") { reply.textContent += ` [${item.error?.message ?? "error"}]`; reply.classList.add("failed"); }
    }
  }
}

async function startBench(form) {
  const { ok, answer } = await post(form.dataset.bench, { values: formValues(form) });
  say(ok ? answer.message : `${answer.error.code}: ${answer.error.message}`, ok ? "ok" : "error");
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-action]");
  if (button) { event.preventDefault(); act(button); }
});
document.addEventListener("change", (event) => {
  if (event.target.matches("[data-ns-select]")) window.location.assign(`/ns/${encodeURIComponent(event.target.value)}/runs`);
  if (event.target.matches("[data-run-select]")) event.target.form.submit();
  if (event.target.matches("[data-filter-revision], [data-filter-errors]")) applyFilters();
});
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.matches("[data-invoke]")) { event.preventDefault(); invoke(form); }
  if (form.matches("[data-chat]")) { event.preventDefault(); chat(form); }
  if (form.matches("[data-bench]")) { event.preventDefault(); startBench(form); }
  if (form.matches("[data-filters], [data-ns-picker]")) event.preventDefault();
});
for (const element of document.querySelectorAll("[data-live]")) follow(element);
