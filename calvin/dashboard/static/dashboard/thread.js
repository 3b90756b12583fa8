// The thread page's live feed: messages pushed over the websocket are appended; on (re)connect
// the page asks for what it missed. A static file, because the Content-Security-Policy allows no inline script.
(function () {
  const box = document.getElementById("messages");
  const status = document.getElementById("live-status");
  if (!box || !box.dataset.live) return;  // an earlier page is not live
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  let delay = 500;

  function lastId() {
    const ids = [...box.querySelectorAll("[id^=message-]")].map((el) => Number(el.id.slice(8)));
    return ids.length ? Math.max(...ids) : 0;
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
      if (typeof data.html !== "string") return;  // e.g. {"error": ...}
      if (document.getElementById(`message-${data.id}`)) return;  // a retried delivery
      box.insertAdjacentHTML("beforeend", data.html);
    };
    ws.onclose = (event) => {
      if (event.code === 4403) { status.textContent = "not allowed"; status.dataset.state = "refused"; return; }
      status.textContent = "reconnecting…"; status.dataset.state = "closed";
      setTimeout(connect, delay); delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();
