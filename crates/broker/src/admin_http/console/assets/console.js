// Gregor console: refreshes each page's live part in place by short polling (the same URL
// with fragment=1), keeping the scroll position and the filter; confirms actions. The pages
// work without it (read-only, reload to refresh).
(function () {
  "use strict";
  var live = document.getElementById("live");
  var filter = document.getElementById("filter");
  var state = document.getElementById("refresh-state");

  function applyFilter() {
    if (!filter || !live) return;
    var f = filter.value.toLowerCase();
    live.querySelectorAll("[data-name]").forEach(function (row) {
      row.hidden = f !== "" && row.getAttribute("data-name").toLowerCase().indexOf(f) < 0;
    });
  }

  if (filter) {
    filter.addEventListener("input", function () {
      var u = new URL(location.href);
      if (filter.value) u.searchParams.set("filter", filter.value); else u.searchParams.delete("filter");
      history.replaceState(null, "", u);
      applyFilter();
    });
  }

  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (e) {
      if (e.submitter && e.submitter.hasAttribute("data-no-confirm")) return;
      if (!window.confirm(form.getAttribute("data-confirm"))) e.preventDefault();
    });
  });

  if (!live || !live.getAttribute("data-refresh")) return;
  var every = parseInt(live.getAttribute("data-refresh"), 10) || 2000;

  function tick() {
    var u = new URL(location.href);
    u.searchParams.set("fragment", "1");
    fetch(u.toString(), { headers: { Accept: "text/html" }, cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        var x = window.scrollX, y = window.scrollY;
        var inner = live.querySelector(".matrix-wrap");
        var ix = inner ? inner.scrollLeft : 0, iy = inner ? inner.scrollTop : 0;
        live.innerHTML = html;
        var again = live.querySelector(".matrix-wrap");
        if (again) { again.scrollLeft = ix; again.scrollTop = iy; }
        applyFilter();
        window.scrollTo(x, y);
        if (state) state.textContent = "live · " + new Date().toLocaleTimeString();
      })
      .catch(function (e) {
        if (state) state.textContent = "refresh failed (" + e.message + "), retrying";
      })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
