// Buttons on cards, approvals and questions (a `form[data-press]` anywhere on the page) post the
// pressed button's value (and the form's own fields: an allow rule's command prefix) with the
// page's CSRF token to the form's action, and the answer shows
// in the form's `.action-result`. The buttons wait while the press is in flight (a double click
// is one press); the new state comes live (the thread's message, the home's panels: live.js
// refetches on "actions:answered"). A static file: the Content-Security-Policy allows no inline script.
(function () {
  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form[data-press]");
    if (!form) return;
    event.preventDefault();
    const button = event.submitter;
    const buttons = [...form.querySelectorAll("button")];
    const token = document.querySelector("input[name=csrfmiddlewaretoken]");
    const body = new FormData(form);
    body.set("value", button ? button.value : "");
    for (const b of buttons) b.disabled = true;
    form.dispatchEvent(new CustomEvent("actions:pressed", {bubbles: true}));
    let data = {ok: false, text: "could not reach Calvin; try again"};
    try {
      const response = await fetch(form.action, {
        method: "POST", body, credentials: "same-origin",
        headers: {"X-CSRFToken": token ? token.value : "", "Accept": "application/json"},
      });
      data = await response.json();
    } catch (error) {
      // Offline, or not JSON (a proxy's error page): the default answer says so.
    }
    // The card may have been re-rendered live while the press was in flight: answer on the one shown.
    const action = form.getAttribute("action");
    const shown = form.isConnected ? form : document.querySelector(`form[data-press][action="${CSS.escape(action)}"]`);
    const result = shown && shown.querySelector(".action-result");
    if (result) { result.textContent = data.text; result.dataset.ok = String(data.ok); }
    if (shown) for (const b of shown.querySelectorAll("button")) b.disabled = Boolean(data.ok);
    (shown || document).dispatchEvent(new CustomEvent("actions:answered", {bubbles: true, detail: data}));
  });
})();
