// The thread page's live feed: messages pushed over the websocket are appended (or replace the
// one shown, when it was edited, reacted to or its card decided); on (re)connect the page asks
// for what it missed. Buttons on cards post with the page's CSRF token and show the answer.
// A static file, because the Content-Security-Policy allows no inline script.
(function () {
  const box = document.getElementById("messages");
  const status = document.getElementById("live-status");
  if (!box) return;

  box.addEventListener("submit", async (event) => {
    const form = event.target.closest("form.actions");
    if (!form) return;
    event.preventDefault();
    const button = event.submitter;
    const result = form.querySelector(".action-result");
    const token = document.querySelector("input[name=csrfmiddlewaretoken]");
    const body = new FormData();
    body.append("value", button ? button.value : "");
    try {
      const response = await fetch(form.action, {
        method: "POST", body, credentials: "same-origin",
        headers: {"X-CSRFToken": token ? token.value : "", "Accept": "application/json"},
      });
      const data = await response.json();
      if (result) { result.textContent = data.text; result.dataset.ok = String(data.ok); }
    } catch (error) {
      if (result) { result.textContent = "could not reach Calvin; try again"; result.dataset.ok = "false"; }
    }
  });

  if (!box.dataset.live) return;  // an earlier page is not live
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  let delay = 500;

  function lastId() {
    const ids = [...box.querySelectorAll("[id^=message-]")].map((el) => Number(el.id.slice(8)));
    return ids.length ? Math.max(...ids) : 0;
  }

  function show(data) {
    const shown = document.getElementById(`message-${data.id}`);
    if (shown && data.replace) { shown.outerHTML = data.html; return; }
    if (shown) return;  // a retried delivery
    // A send_message delivered late can have a smaller id than messages shown already: keep id order.
    const later = [...box.querySelectorAll("[id^=message-]")].find((el) => Number(el.id.slice(8)) > data.id);
    if (later) later.insertAdjacentHTML("beforebegin", data.html);
    else box.insertAdjacentHTML("beforeend", data.html);
  }

  // What the agent does right now, as plain text (textContent: never parsed as HTML).
  const activity = document.getElementById("agent-activity");
  function showActivity(event) {
    if (!activity) return;
    const labels = {started: "working…", finished: "", tool_use: `using ${event.name}`, tool_result: `${event.name} answered`};
    activity.textContent = event.kind in labels ? labels[event.kind] : (event.text || "").slice(0, 200);
    activity.dataset.kind = event.kind;
  }

  function connect() {
    const ws = new WebSocket(`${scheme}://${location.host}${box.dataset.live}`);
    ws.onopen = () => {
      status.textContent = "live"; status.dataset.state = "live"; delay = 500;
      ws.send(JSON.stringify({since: lastId()}));
    };
    ws.onmessage = (event) => {
      const data = JSON.parse(event.data);
      if (data.reload) { location.replace(location.pathname); return; }  // missed too much: show the latest page
      if (data.activity) { showActivity(data.activity); return; }
      if (typeof data.html !== "string") return;  // e.g. {"error": ...}
      show(data);
    };
    ws.onclose = (event) => {
      if (event.code === 4403) { status.textContent = "not allowed"; status.dataset.state = "refused"; return; }
      status.textContent = "reconnecting…"; status.dataset.state = "closed";
      setTimeout(connect, delay); delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();
