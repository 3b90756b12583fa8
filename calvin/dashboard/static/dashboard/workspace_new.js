// The create page suggests a slug from the name until the slug is typed into. Only a suggestion:
// letters outside a-z are dropped here, and the server checks whatever is sent.
(function () {
  const name = document.getElementById("id_name");
  const slug = document.getElementById("id_slug");
  if (!name || !slug) return;
  let typed = slug.value !== "";
  slug.addEventListener("input", () => { typed = slug.value !== ""; });
  name.addEventListener("input", () => {
    if (typed) return;
    slug.value = name.value.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+/, "").slice(0, 50).replace(/-+$/, "");
  });
})();
