// Sorting and filtering of the result tables. The page is complete without this script:
// it only adds the ordering a reader asks for and a text filter above each table.
(function () {
  "use strict";
  // A cell's sort key: the number it starts with, scaled by its unit, else its text.
  var scale = { "ps": 1e-3, "ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9,
                "B/s": 1, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9 };
  function key(td) {
    var t = td.textContent.trim();
    var m = t.match(/^[×±]?(-?[0-9][0-9.,]*(?:e[-+]?[0-9]+)?)\s*([a-zµ/%]*)/i);
    if (!m) return { n: NaN, s: t.toLowerCase() };
    var n = parseFloat(m[1].replace(/,/g, ""));
    if (scale[m[2]] !== undefined) n *= scale[m[2]];
    return { n: n, s: t.toLowerCase() };
  }
  function sortBy(table, col, dir) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      var c = (!isNaN(x.n) && !isNaN(y.n)) ? x.n - y.n : (x.s < y.s ? -1 : x.s > y.s ? 1 : 0);
      return dir * c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, col) {
      th.tabIndex = 0;
      function go() {
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        sortBy(table, col, dir);
      }
      th.addEventListener("click", go);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") go(); });
    });
    var input = document.createElement("input");
    input.type = "search";
    input.className = "filter";
    input.placeholder = "filter rows";
    input.setAttribute("aria-label", "filter the rows of the table below");
    input.addEventListener("input", function () {
      var q = input.value.toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        r.hidden = q !== "" && r.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
    var holder = table.closest(".scroll") || table;
    holder.parentNode.insertBefore(input, holder);
  });
  // A link can carry an ordering: #sort=TABLE,COLUMN,asc|desc (tables counted from 0 in
  // page order), so a sorted view can be shared.
  var m = location.hash.match(/^#sort=(\d+),(\d+),(asc|desc)$/);
  if (m && tables[+m[1]]) {
    var th = tables[+m[1]].tHead.rows[0].cells[+m[2]];
    if (th) {
      th.setAttribute("aria-sort", m[3] === "asc" ? "descending" : "ascending");
      th.click();
    }
  }
})();
