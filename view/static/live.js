// berth view: live updates of a running job, the only script of the
// viewer. Tables, sorting, filtering and paging work without it. It polls
// the page's JSON endpoint (main[data-live]) and, when the job changed,
// fetches the same URL again and swaps in the new <main>: the server
// renders and escapes everything, and nothing here builds markup from data.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  if (!main || !window.fetch || !window.DOMParser) {
    return;
  }
  var api = main.getAttribute("data-live");
  var last = null;
  var every = 2000;

  function refresh() {
    return fetch(window.location.href, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.querySelector("main");
        if (!next) {
          return;
        }
        var nodes = Array.prototype.map.call(next.childNodes, function (n) { return document.importNode(n, true); });
        main.replaceChildren.apply(main, nodes);
      });
  }

  function tick() {
    fetch(api, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (s) {
        var changed = last !== null && s.sig !== last;
        last = s.sig;
        var next = changed ? refresh() : Promise.resolve();
        return next.then(function () {
          if (s.live) {
            window.setTimeout(tick, every);
          }
        });
      })
      .catch(function () { window.setTimeout(tick, every * 3); });
  }
  tick();
})();
