// The thread page's reply box: posts without a page reload (the message itself arrives through
// the live feed, thread.js), keeps the text and says why when the post fails. One post at a time,
// so a double click or Enter pressed twice sends once. A static file: the CSP allows no inline script.
(function () {
  const form = document.getElementById("reply-form");
  if (!form) return;
  const box = form.querySelector("textarea[name=text]");
  const button = form.querySelector("button[type=submit]");
  const error = document.getElementById("reply-error");
  let sending = false;

  function token() {
    const input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function say(text) {
    if (error) error.textContent = text;
    form.classList.toggle("failed", Boolean(text));
  }

  async function send() {
    if (sending) return;
    if (!box.value.trim()) { say("Write something first."); box.focus(); return; }
    sending = true;
    button.disabled = true;
    say("");
    const text = box.value;
    try {
      const response = await fetch(form.action, {
        method: "POST", body: new FormData(form), credentials: "same-origin",
        headers: {"X-CSRFToken": token(), "Accept": "application/json"},
      });
      let data = {};
      try { data = await response.json(); } catch (ignored) { /* e.g. a proxy's HTML error page */ }
      if (response.ok && data.ok) {
        if (box.value === text) box.value = "";  // keep what was typed while it was sending
      } else {
        say(data.error || `Not sent (${response.status}); your text is still here.`);
      }
    } catch (failure) {
      say("Not sent: Calvin could not be reached. Your text is still here; try again.");
    } finally {
      sending = false;
      button.disabled = false;
      box.focus();
    }
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); send(); });
  // Enter sends, as in Slack; Shift+Enter is a new line; Ctrl/Cmd+Enter sends too.
  box.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.isComposing || event.shiftKey || event.altKey) return;
    event.preventDefault();
    send();
  });

  // The header is re-rendered on the server without a request (so with no CSRF token) and pushed
  // live: its Stop form borrows the page's token when it is pressed.
  document.addEventListener("submit", (event) => {
    const other = event.target;
    if (other === form || other.method !== "post") return;
    let input = other.querySelector("input[name=csrfmiddlewaretoken]");
    if (!input) {
      input = document.createElement("input");
      input.type = "hidden"; input.name = "csrfmiddlewaretoken";
      other.appendChild(input);
    }
    if (!input.value) input.value = token();
  }, true);
})();
