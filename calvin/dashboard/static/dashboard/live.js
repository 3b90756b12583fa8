// Live refresh of server-rendered panels. An element `data-live-stream="/ws/workspaces/<id>/"`
// (optionally `data-live-seq`: the seq the page was rendered at; `data-live-kinds`: the event
// kinds that matter here, comma-separated) makes this open that socket. On an event it refetches
// the page's own URL (debounced) and puts in every `data-live-panel="<name>"` the fetched one of
// the same name. Rows keyed `data-row-key="<kind>:<id>"` (or, in a panel marked
// `data-live-rows="<kind>"`, keyed here from the admin's row links) are updated in place: a row
// that is new or changed gets the class `live-changed` for a moment; an admin row's checkbox
// stays the same element (checked, with the admin's own listeners). `[data-live-mark]` (made if
// the page has none) shows the socket's state. Seqs: each applied once; after a reconnect or a
// gap the page refetches once, which shows everything up to that seq (seq order is commit order).
// A static file: the Content-Security-Policy allows no inline script.
(function () {
  const streams = [...document.querySelectorAll("[data-live-stream]")];
  if (!streams.length) return;
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const DEBOUNCE_MS = 300, CHANGED_MS = 3000;

  let mark = document.querySelector("[data-live-mark]");
  if (!mark) {
    mark = document.createElement("span");
    mark.className = "live-mark";
    mark.setAttribute("data-live-mark", "");
    streams[0].prepend(mark);
  }
  const states = new Map();  // url -> "live" | "closed" | "refused"
  function showState() {
    const all = [...states.values()];
    const state = all.includes("refused") ? "refused" : all.every((s) => s === "live") ? "live" : "closed";
    mark.dataset.state = state;
    mark.textContent = state === "live" ? "live" : state === "refused" ? "not live" : "reconnecting…";
    mark.title = state === "live" ? "This page updates itself" : "Updates paused; reload to see the latest";
  }

  // --- refetch and replace -------------------------------------------------------------------
  let timer = null, fetching = false, again = false;
  // Presses in flight or whose answer is still being read: the panels wait for them (each ends
  // with a refresh), or the decision's own event would take the pressed item away before its
  // answer could be shown.
  let holding = 0;
  function refresh() {
    if (holding) return;
    if (timer) return;
    timer = setTimeout(() => { timer = null; fetchPanels(); }, DEBOUNCE_MS);
  }

  // A decision from this page (actions.js): its answer stays readable a moment, then the
  // panels show the new state (the event the decision pushes may not concern this page's kinds).
  document.addEventListener("actions:pressed", () => { holding += 1; });
  document.addEventListener("actions:answered", (event) => {
    setTimeout(() => {
      holding = Math.max(0, holding - 1);
      refresh();
    }, event.detail && event.detail.ok ? 1200 : 3000);
  });

  async function fetchPanels() {
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      const response = await fetch(location.href, {credentials: "same-origin", headers: {"X-Calvin-Live": "1"}});
      // Fetched while a press waits for its answer: dropped, its answer's refresh comes after.
      if (!holding && response.ok) {
        const fetched = new DOMParser().parseFromString(await response.text(), "text/html");
        for (const panel of document.querySelectorAll("[data-live-panel]")) {
          const name = panel.dataset.livePanel;
          const fresh = [...fetched.querySelectorAll("[data-live-panel]")].find((p) => p.dataset.livePanel === name);
          if (fresh) update(panel, document.importNode(fresh, true));
        }
        adminCounter(fetched);
        document.dispatchEvent(new CustomEvent("live:refreshed"));
      }
    } catch (error) {
      // Offline for a moment: the next event (or reconnect) fetches again.
    } finally {
      fetching = false;
      if (again) { again = false; refresh(); }
    }
  }

  // The admin's "n of N selected": Django's actions.js read N and took the rows' checkboxes
  // once, at load. N follows the fetched page here, and rows added live count (and the
  // select-all box checks them) too; this runs after the admin's own click handlers.
  function adminCounter(fetched) {
    const counter = document.querySelector(".action-counter");
    const fresh = fetched.querySelector(".action-counter");
    if (!counter || !fresh || !fresh.dataset.actionsIcnt) return;
    counter.dataset.actionsIcnt = fresh.dataset.actionsIcnt;
    recount();
  }

  function adminBoxes() {
    return [...document.querySelectorAll("#result_list tbody input.action-select")];
  }

  function recount() {
    const counter = document.querySelector(".action-counter");
    if (!counter) return;
    const boxes = adminBoxes();
    for (const box of boxes) box.closest("tr").classList.toggle("selected", box.checked);
    const checked = boxes.filter((box) => box.checked).length;
    counter.textContent = counter.textContent.replace(/\d+(\D+)\d+/, `${checked}$1${counter.dataset.actionsIcnt}`);
  }

  document.addEventListener("change", (event) => {
    const box = event.target;
    if (box.id === "action-toggle") for (const each of adminBoxes()) each.checked = box.checked;
    if (box.id === "action-toggle" || box.matches("input.action-select")) recount();
  });

  function keyRows(panel) {
    const kind = panel.dataset.liveRows;
    if (!kind) return;
    for (const row of panel.querySelectorAll("tbody tr")) {
      if (row.dataset.rowKey) continue;
      const box = row.querySelector("input.action-select");
      const link = row.querySelector("a[href*='/change/']");
      const id = box ? box.value : link ? (link.getAttribute("href").match(/\/(\d+)\/change\//) || [])[1] : null;
      if (id) row.dataset.rowKey = `${kind}:${id}`;
    }
  }

  function flash(element) {
    element.classList.add("live-changed");
    setTimeout(() => element.classList.remove("live-changed"), CHANGED_MS);
  }

  function served(element) {
    // The HTML as the server sent it: time.js rewrites a shown <time> into the reader's zone (its
    // text, title, data-local), which a freshly fetched one is not yet, and that is no change.
    const copy = element.cloneNode(true);
    for (const time of copy.querySelectorAll("time[datetime]")) {
      time.textContent = time.getAttribute("datetime");
      time.removeAttribute("title");
      time.removeAttribute("data-local");
    }
    return copy.innerHTML;
  }

  function cellsHtml(row) {
    // What a row shows, without its checkbox's state (checked here, not in the fetched page).
    return [...row.children].map((cell) => (cell.querySelector("input.action-select") ? "" : served(cell))).join("\u0000");
  }

  function update(panel, fresh) {
    keyRows(panel); keyRows(fresh);
    const oldRows = new Map([...panel.querySelectorAll("[data-row-key]")].map((r) => [r.dataset.rowKey, r]));
    const newRows = [...fresh.querySelectorAll("[data-row-key]")];
    const body = panel.querySelector("tbody");
    if (!newRows.length || !oldRows.size || (panel.dataset.liveRows && !body)) {
      // Nothing to match row by row (an empty list, or a panel of other things): replace it whole.
      const seen = new Set(oldRows.keys());
      panel.replaceWith(fresh);
      for (const row of fresh.querySelectorAll("[data-row-key]")) if (!seen.has(row.dataset.rowKey)) flash(row);
      return;
    }
    if (panel.dataset.liveRows) {
      // The admin's list: rows kept as elements, moved into the new order, changed cells replaced.
      const rows = newRows.map((row) => {
        const shown = oldRows.get(row.dataset.rowKey);
        if (!shown) { flash(row); return row; }
        if (cellsHtml(shown) !== cellsHtml(row)) {
          [...row.children].forEach((cell, i) => {
            const old = shown.children[i];
            if (old && !old.querySelector("input.action-select") && served(old) !== served(cell)) old.replaceWith(cell.cloneNode(true));
          });
          flash(shown);
        }
        oldRows.delete(row.dataset.rowKey);
        return shown;
      });
      for (const gone of oldRows.values()) gone.remove();
      rows.forEach((row) => body.appendChild(row));
      return;
    }
    // A dashboard panel: replaced whole, marking the rows that are new or changed.
    const before = new Map([...oldRows].map(([key, row]) => [key, served(row)]));
    panel.replaceWith(fresh);
    for (const row of fresh.querySelectorAll("[data-row-key]")) {
      if (before.get(row.dataset.rowKey) !== served(row)) flash(row);
    }
  }

  // --- sockets, seqs -------------------------------------------------------------------------
  function follow(element) {
    const url = element.dataset.liveStream;
    const kinds = (element.dataset.liveKinds || "").split(",").map((k) => k.trim()).filter(Boolean);
    let last = element.dataset.liveSeq === undefined ? null : Number(element.dataset.liveSeq);
    let delay = 500;
    states.set(url, "closed");

    function connect() {
      const ws = new WebSocket(`${scheme}://${location.host}${url}`);
      ws.onopen = () => {
        delay = 500; states.set(url, "live"); showState();
        ws.send(JSON.stringify({since: last}));  // null: "where are you?"; else what came after `last`
      };
      ws.onmessage = (message) => {
        const data = JSON.parse(message.data);
        if (data.reload) { refresh(); last = null; ws.send(JSON.stringify({since: null})); return; }
        if (typeof data.at === "number") {
          // Rendered without a seq: what committed between render and now is in a refetch.
          if (last === null && element.dataset.liveSeq === undefined) refresh();
          last = data.at; element.dataset.liveSeq = String(last);
          return;
        }
        if (typeof data.seq !== "number" || (last !== null && data.seq <= last)) return;  // applied already
        // seq last+1 applies; a gap means a lost push: the refetch shows it (seq order is commit order).
        const gap = last !== null && data.seq > last + 1;
        last = data.seq; element.dataset.liveSeq = String(last);
        if (gap || !kinds.length || kinds.includes(data.event)) refresh();
      };
      ws.onclose = (event) => {
        if (event.code === 4403) { states.set(url, "refused"); showState(); return; }
        states.set(url, "closed"); showState();
        setTimeout(connect, delay); delay = Math.min(delay * 2, 10000);
      };
    }
    connect();
  }
  streams.forEach(follow);
  showState();
})();
