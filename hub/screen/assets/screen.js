// Settings › MCP Tools: live updates, the add-server form sent in place,
// and secret names offered as you type $. The pages work without this;
// it only spares the reloads. No token is ever read here: the session
// cookie is HttpOnly, and requests carry the page's CSRF token.
"use strict";

(function () {
  const base = "/settings/mcp-tools";
  const csrf = document.body.dataset.csrf || "";

  // ---- live: an event stream says a server or a catalogue changed; the
  // page then fetches its live region again and swaps it in.
  const live = document.getElementById("live");
  const status = document.getElementById("live-status");

  function signedOut() {
    window.location.assign(base + "/sign-in?ended=1");
  }

  let fetching = false;
  let again = false;
  async function refresh() {
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      do {
        again = false;
        const res = await fetch(window.location.pathname + "?live=1", { credentials: "same-origin", cache: "no-store" });
        if (res.status === 401) { signedOut(); return; }
        if (!res.ok) { throw new Error("HTTP " + res.status); }
        // The builtins' folds the person opened stay open across the swap.
        const open = new Set(Array.from(live.querySelectorAll("details[data-server][open]"), function (d) { return d.dataset.server; }));
        live.innerHTML = await res.text();
        live.querySelectorAll("details[data-server]").forEach(function (d) { d.open = open.has(d.dataset.server); });
        status.classList.remove("stale");
        status.textContent = "Updated " + new Date().toLocaleTimeString() + ".";
      } while (again);
    } catch (e) {
      status.classList.add("stale");
      status.textContent = "Could not update this page (" + e.message + "); it shows what it last read.";
    } finally {
      fetching = false;
    }
  }

  if (live && status && window.EventSource) {
    const es = new EventSource(base + "/events?since=" + encodeURIComponent(status.dataset.version || "0"));
    es.addEventListener("change", refresh);
    es.addEventListener("signed-out", function () { es.close(); signedOut(); });
    es.addEventListener("error", function () {
      if (es.readyState === EventSource.CLOSED) {
        // Refused outright (a session that ended): the fetch says which.
        refresh();
      } else {
        status.classList.add("stale");
        status.textContent = "Lost the hub; reconnecting.";
      }
    });
    es.addEventListener("open", function () { status.classList.remove("stale"); });
  }

  // ---- the add-server form
  const form = document.getElementById("add-server");
  if (!form) { return; }
  const result = document.getElementById("add-result");

  function showTransport() {
    const http = form.querySelector("input[name=transport]:checked").value === "http";
    form.querySelectorAll(".for-stdio").forEach(function (el) { el.hidden = http; });
    form.querySelectorAll(".for-http").forEach(function (el) { el.hidden = !http; });
  }
  form.querySelectorAll("input[name=transport]").forEach(function (r) { r.addEventListener("change", showTransport); });
  showTransport();

  form.querySelectorAll("button.add-row").forEach(function (b) {
    b.addEventListener("click", function () {
      const set = b.closest("fieldset");
      const rows = set.querySelectorAll(".pair");
      const row = rows[rows.length - 1].cloneNode(true);
      const n = rows.length;
      row.querySelectorAll("input").forEach(function (input) {
        const which = input.name.endsWith("_name") ? "name" : "value";
        input.id = b.dataset.kind + "-" + which + "-" + n;
        input.value = "";
      });
      row.querySelectorAll("label").forEach(function (label, i) {
        const which = i === 0 ? "name" : "value";
        label.htmlFor = b.dataset.kind + "-" + which + "-" + n;
        label.textContent = label.textContent.replace(/\d+$/, String(n + 1));
      });
      set.insertBefore(row, b);
      row.querySelector("input").focus();
    });
  });

  // Secret names, asked for once per form and offered in the datalist as
  // whole values: what is typed before the $ kept, ${NAME} completing it.
  const list = document.getElementById("secret-names");
  let names = null;
  async function secretNames() {
    if (names === null) {
      const res = await fetch(base + "/secret-names", { credentials: "same-origin", cache: "no-store" });
      if (res.status === 401) { signedOut(); return []; }
      names = res.ok ? (await res.json()).names : [];
    }
    return names;
  }
  form.addEventListener("input", async function (ev) {
    const input = ev.target;
    if (!input.classList || !input.classList.contains("secret-ref")) { return; }
    const m = /^(.*)\$\{?([A-Za-z0-9_]*)$/.exec(input.value);
    list.replaceChildren();
    if (!m) { return; }
    const all = await secretNames();
    all.filter(function (n) { return n.toUpperCase().startsWith(m[2].toUpperCase()); }).forEach(function (n) {
      const opt = document.createElement("option");
      opt.value = m[1] + "${" + n + "}";
      opt.textContent = n;
      list.appendChild(opt);
    });
  });

  // clear makes the form a fresh one again once a server is written, as a
  // new page draws it: every field empty whatever the page was drawn with,
  // the rows added for more variables or headers gone (a fresh form has
  // two of each), the choices at their defaults.
  function clear() {
    form.reset();
    form.querySelectorAll("fieldset.pairs").forEach(function (set) {
      set.querySelectorAll(".pair").forEach(function (row, i) {
        if (i >= 2) { row.remove(); }
      });
    });
    form.querySelectorAll("input[type=text], input:not([type]), input[type=url], textarea").forEach(function (input) {
      input.defaultValue = "";
      input.value = "";
    });
    form.querySelector("input[name=transport][value=stdio]").checked = true;
    form.querySelector("input[name=reach][value=shared]").checked = true;
    form.querySelector("input[name=trust][value=pinned]").checked = true;
    showTransport();
  }

  function say(kind, lines) {
    result.replaceChildren();
    const p = document.createElement("p");
    p.className = kind;
    p.textContent = lines[0];
    result.appendChild(p);
    if (lines.length > 1) {
      const ul = document.createElement("ul");
      ul.className = "violations";
      lines.slice(1).forEach(function (l) {
        const li = document.createElement("li");
        li.textContent = l;
        ul.appendChild(li);
      });
      result.appendChild(ul);
    }
    result.focus();
  }

  form.addEventListener("submit", async function (ev) {
    ev.preventDefault();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    const name = form.querySelector("#add-name").value.trim();
    say("note", ["Adding " + name + " and waiting for its first start…"]);
    try {
      const res = await fetch(form.action, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Accept": "application/json", "X-CSRF-Token": csrf },
        body: new URLSearchParams(new FormData(form)),
      });
      if (res.status === 401) { signedOut(); return; }
      const body = await res.json().catch(function () { return {}; });
      if (res.status === 201) {
        // The answer is the server's first state, not the write alone: a
        // server whose start failed, or whose tools were refused, is said
        // to be failing, with its reason, as its row says.
        const tools = body.tools === 1 ? "1 tool" : body.tools + " tools";
        if (body.state === "Running") {
          say("ok", ["Added " + body.added + ": it is running, with " + tools + " listed below."]);
        } else if (body.state === "Failing" || body.state === "Partly failing") {
          say("error", ["Added " + body.added + " to the company file, but it is " + body.state.toLowerCase() + ":", body.reason || "its page says why."]);
        } else {
          say("note", ["Added " + body.added + "; it is " + String(body.state || "not reported").toLowerCase() +
            (body.reason ? ": " + body.reason : ". Its row above follows it.")]);
        }
        clear();
        refresh();
      } else {
        const v = body.violations && body.violations.length ? body.violations : ["The hub answered " + res.status + "."];
        say("error", ["The server was not added:"].concat(v));
      }
    } catch (e) {
      say("error", ["The hub could not be reached: " + e.message]);
    } finally {
      button.disabled = false;
    }
  });
})();
