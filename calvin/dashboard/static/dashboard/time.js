// Every <time datetime="…"> in the reader's time zone, in one format ("2 Dec 2026, 14:02"); the
// server's text ("2026-12-02 14:02 UTC", from the calvin_time filter) stays without script. The
// full moment with its zone is the hover title. Times in HTML added later (a live message, a
// refreshed panel) are rewritten too. A static file: the Content-Security-Policy allows no inline script.
(function () {
  const shown = new Intl.DateTimeFormat("en-GB", {
    day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit", hourCycle: "h23",
  });
  const full = new Intl.DateTimeFormat("en-GB", {
    weekday: "short", day: "numeric", month: "short", year: "numeric",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
  });

  function rewrite(element) {
    if (element.dataset.local === element.getAttribute("datetime")) return;  // done already
    const moment = new Date(element.getAttribute("datetime"));
    if (Number.isNaN(moment.getTime())) return;  // not a moment: the server's text stays
    element.textContent = shown.format(moment);
    element.title = full.format(moment);
    element.dataset.local = element.getAttribute("datetime");
  }

  function rewriteWithin(root) {
    if (root.matches && root.matches("time[datetime]")) rewrite(root);
    if (root.querySelectorAll) root.querySelectorAll("time[datetime]").forEach(rewrite);
  }

  rewriteWithin(document);
  new MutationObserver((changes) => {
    for (const change of changes) change.addedNodes.forEach(rewriteWithin);
  }).observe(document.body, {childList: true, subtree: true});
})();
