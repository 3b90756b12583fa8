// The thread page's live feed. Every event the socket sends carries its thread's seq (no gaps,
// in commit order: calvin/dashboard/live.py): the page applies each seq once, in order, ignores
// one it has, and when one is missing (a push that was lost) asks for exactly the missing ones.
// On (re)connect it asks for everything after the last seq it applied. Messages are appended
// (or replace the one shown), the header is replaced as the server rendered it, and what the
// agent does right now is shown in words. Buttons on cards: actions.js.
// A static file, because the Content-Security-Policy allows no inline script.
(function () {
  const box = document.getElementById("messages");
  const status = document.getElementById("live-status");
  if (!box) return;

  // The running turn's elapsed time, ticking here (the header says when it started).
  function pad(n) { return String(n).padStart(2, "0"); }
  function tick() {
    const started = document.querySelector("#thread-header [data-started-at]");
    let shown = document.getElementById("turn-elapsed");
    if (!started) { if (shown) shown.remove(); return; }
    const since = Date.parse(started.dataset.startedAt);
    if (Number.isNaN(since)) return;
    if (!shown) {
      shown = document.createElement("span");
      shown.id = "turn-elapsed";
      started.insertAdjacentElement("afterend", shown);
    }
    const seconds = Math.max(0, Math.floor((Date.now() - since) / 1000));
    const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    shown.textContent = h ? ` · ${h}h ${pad(m)}m ${pad(s)}s` : ` · ${m}m ${pad(s)}s`;
  }
  tick();
  setInterval(tick, 1000);

  if (!box.dataset.live) return;  // an earlier page is not live
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  let delay = 500;
  let last = Number(box.dataset.liveSeq || 0);  // the seq the page was rendered at
  const ahead = new Map();  // seq -> frame received before the ones under it
  let askedUntil = 0;  // the gap asked for and not yet answered
  let socket = null;
  window.calvinLive = {seq: () => last};  // for tests and the curious: what this page has applied

  // A card re-rendered live keeps the answer its buttons got here (actions.js writes it).
  function keepingAnswers(shown, html) {
    const fresh = document.createRange().createContextualFragment(html);
    for (const result of shown.querySelectorAll("form[data-press] .action-result")) {
      if (!result.textContent) continue;
      const action = result.closest("form").getAttribute("action");
      const twin = fresh.querySelector(`form[data-press][action="${CSS.escape(action)}"] .action-result`);
      if (!twin) continue;
      twin.textContent = result.textContent;
      twin.dataset.ok = result.dataset.ok;
      // Pressed and taken: this reader's buttons stay done (a second press would be refused).
      if (result.dataset.ok === "true") for (const b of twin.closest("form").querySelectorAll("button")) b.disabled = true;
    }
    return fresh;
  }

  function showMessage(data) {
    const shown = document.getElementById(`message-${data.id}`);
    if (shown && data.replace) { shown.replaceWith(keepingAnswers(shown, data.html)); return; }
    if (shown) return;  // a retried delivery, or one the page was rendered with
    // A send_message delivered late can have a smaller id than messages shown already: keep id order.
    const later = [...box.querySelectorAll("[id^=message-]")].find((el) => Number(el.id.slice(8)) > data.id);
    if (later) later.insertAdjacentHTML("beforebegin", data.html);
    else box.insertAdjacentHTML("beforeend", data.html);
  }

  function showHeader(html) {
    const header = document.getElementById("thread-header");
    if (!header || !html) return;
    const activity = document.getElementById("agent-activity");
    const fresh = document.createRange().createContextualFragment(html).firstElementChild;
    if (!fresh) return;
    // What the agent does now is not in the server's render: keep the words shown until the next step.
    const slot = fresh.querySelector("#agent-activity");
    if (slot && activity) slot.replaceWith(activity);
    header.replaceWith(fresh);
    tick();
  }

  // The previews panel is rendered for the viewer (their controls, their CSRF token): fetched again.
  let previewsFetch = null;
  function refreshPreviews() {
    if (previewsFetch) { previewsFetch.again = true; return; }
    previewsFetch = {again: false};
    fetch(location.href, {credentials: "same-origin", headers: {"X-Calvin-Live": "1"}})
      .then((response) => response.ok ? response.text() : null)
      .then((text) => {
        const fresh = text && new DOMParser().parseFromString(text, "text/html").getElementById("previews-slot");
        const slot = document.getElementById("previews-slot");
        if (fresh && slot) slot.replaceWith(document.adoptNode(fresh));
      })
      .catch(() => {})
      .finally(() => {
        const again = previewsFetch.again;
        previewsFetch = null;
        if (again) refreshPreviews();
      });
  }

  function apply(frame) {
    if (typeof frame.html === "string") showMessage(frame);
    if (typeof frame.header === "string") showHeader(frame.header);
    if (frame.event === "previews") refreshPreviews();
    box.dataset.liveSeq = String(last);
  }

  function ask(since, until) {
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    socket.send(JSON.stringify(until === undefined ? {since} : {since, until}));
  }

  function receive(frame) {
    if (typeof frame.seq !== "number") {  // a push without a seq: shown, not counted
      if (typeof frame.html === "string") showMessage(frame);
      return;
    }
    if (frame.seq <= last || ahead.has(frame.seq)) return;  // applied already
    ahead.set(frame.seq, frame);
    while (ahead.has(last + 1)) {
      const next = ahead.get(last + 1);
      ahead.delete(last + 1);
      last += 1;
      apply(next);
    }
    if (!ahead.size) { askedUntil = 0; return; }
    const missing = Math.min(...ahead.keys()) - 1;  // seqs last+1 .. missing were lost on the way
    if (missing > askedUntil) { askedUntil = missing; ask(last, missing); }
  }

  // What the agent does right now, as plain text (textContent: never parsed as HTML).
  function showActivity(event) {
    const activity = document.getElementById("agent-activity");
    if (!activity) return;
    const words = event.kind === "finished" ? "" : (event.step || event.name || "");
    activity.textContent = words ? `· ${words.slice(0, 200)}` : "";
    activity.dataset.kind = event.kind;
  }

  function connect() {
    const ws = new WebSocket(`${scheme}://${location.host}${box.dataset.live}`);
    socket = ws;
    ws.onopen = () => {
      status.textContent = "live"; status.dataset.state = "live"; delay = 500;
      ahead.clear(); askedUntil = 0;
      ask(last);
    };
    ws.onmessage = (event) => {
      const data = JSON.parse(event.data);
      if (data.reload) { location.replace(location.pathname); return; }  // missed too much: show the latest page
      if (data.activity) { showActivity(data.activity); return; }
      if (data.error) { askedUntil = 0; return; }  // e.g. too many catch-ups: the next push or reconnect asks again
      receive(data);
    };
    ws.onclose = (event) => {
      if (socket === ws) socket = null;
      if (event.code === 4403) { status.textContent = "not allowed"; status.dataset.state = "refused"; return; }
      status.textContent = "reconnecting…"; status.dataset.state = "closed";
      setTimeout(connect, delay); delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();
