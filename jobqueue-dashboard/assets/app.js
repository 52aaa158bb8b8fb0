// Reloads a page that asks for it (data-refresh, in seconds), unless the
// reader is in a form field.
(function () {
  var every = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (every > 0) {
    setInterval(function () {
      var active = document.activeElement;
      if (!active || (active.tagName !== "INPUT" && active.tagName !== "SELECT")) {
        location.reload();
      }
    }, every * 1000);
  }
})();
