// The workspace home: decide buttons (approvals, questions) post with the page's CSRF token to the
// same endpoint as the thread's cards, show the answer, then the page's live panels are fetched
// again so counts and lists show the decision (live.js does the same on every pushed event).
(function () {
  const home = document.getElementById("workspace-home");
  if (!home) return;

  async function refreshPanels() {
    const response = await fetch(location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}});
    if (!response.ok) return;
    const fetched = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const panel of document.querySelectorAll("[data-live-panel]")) {
      const fresh = fetched.querySelector(`[data-live-panel="${panel.dataset.livePanel}"]`);
      if (fresh) panel.replaceWith(document.importNode(fresh, true));
    }
  }

  home.addEventListener("submit", async (event) => {
    const form = event.target.closest("form.actions");
    if (!form) return;
    event.preventDefault();
    const button = event.submitter;
    const result = form.querySelector(".action-result");
    const token = document.querySelector("input[name=csrfmiddlewaretoken]");
    const body = new FormData();
    body.append("value", button ? button.value : "");
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    try {
      const response = await fetch(form.action, {
        method: "POST", body, credentials: "same-origin",
        headers: {"X-CSRFToken": token ? token.value : "", "Accept": "application/json"},
      });
      const data = await response.json();
      if (result) { result.textContent = data.text; result.dataset.ok = String(data.ok); }
      // The answer stays readable a moment before the panel shows the new state.
      setTimeout(refreshPanels, data.ok ? 1200 : 3000);
    } catch (error) {
      if (result) { result.textContent = "could not reach Calvin; try again"; result.dataset.ok = "false"; }
      for (const b of form.querySelectorAll("button")) b.disabled = false;
    }
  });
})();
