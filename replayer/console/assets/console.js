// Intake console: small progressive enhancements. Every page reads without
// this file; it adds copy buttons, select-all and live replay progress.
(function () {
  "use strict";
  document.addEventListener("click", function (e) {
    var b = e.target.closest("button.copy");
    if (!b) return;
    var el = document.getElementById(b.dataset.copy);
    if (el && navigator.clipboard) {
      navigator.clipboard.writeText(el.textContent).then(function () { b.textContent = "Copied"; });
    }
  });
  document.addEventListener("change", function (e) {
    if (e.target.id !== "select-all") return;
    document.querySelectorAll("input[name=key]").forEach(function (c) { c.checked = e.target.checked; });
  });
  // A running replay's page refreshes its progress until the replay ends.
  var prog = document.getElementById("progress");
  if (prog && prog.dataset.state === "running") {
    var poll = function () {
      fetch(location.pathname + "?fragment=progress", { credentials: "same-origin" })
        .then(function (r) { return r.text(); })
        .then(function (html) {
          var div = document.createElement("div");
          div.innerHTML = html;
          var next = div.querySelector("#progress");
          if (!next) return;
          prog.replaceWith(next);
          prog = next;
          if (next.dataset.state === "running") setTimeout(poll, 1000);
          else location.reload();
        });
    };
    setTimeout(poll, 1000);
  }
})();
