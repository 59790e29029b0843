// Sorting and filtering of the result tables, and their raw-sample plots. The page is
// complete without this script but for those plots (its <noscript> line says so): it adds
// the ordering a reader asks for, a text filter above each table, and draws each row's plot
// from the code in its cell — a folded table's when the table is first opened. The report
// fills in the strips' alphabet and size below from its Rust definitions (html.rs, `script`).
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
    var holder = table.closest(".scroll") || table;
    // The notes every row of a probe shares are said once above the table (p.key with
    // data-probe and data-notes); a row still matches them, as it did when each row said them.
    var shared = {};
    for (var k = holder.previousElementSibling; k && k.matches("p.key[data-probe]");
         k = k.previousElementSibling) {
      shared[k.getAttribute("data-probe")] = " " + k.getAttribute("data-notes").toLowerCase();
    }
    input.addEventListener("input", function () {
      var q = input.value.toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        var text = r.textContent.toLowerCase() + (shared[r.cells[0].textContent] || "");
        r.hidden = q !== "" && text.indexOf(q) < 0;
      });
    });
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
  // The results tables' raw-sample plots, drawn from each cell's data-s: one character per
  // mark (the interval's ends, the median, then the samples), its place in ALPHABET the
  // mark's position on the scale, as the report's Rust `svg::strip_code` wrote it; SIZE is
  // `svg::STRIP_SIZE` (width, height, padding either side of the scale).
  var ALPHABET = "{{strip_alphabet}}";
  var SIZE = "{{strip_size}}".split(" ").map(Number);
  var NS = "http://www.w3.org/2000/svg";
  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function strip(holder) {
    var w = SIZE[0], h = SIZE[1], pad = SIZE[2], step = (w - 2 * pad) / (ALPHABET.length - 1);
    var x = holder.getAttribute("data-s").split("").map(function (c) {
      return (pad + ALPHABET.indexOf(c) * step).toFixed(1);
    });
    if (x.length < 4) return;
    var svg = el("svg", { "class": "strip", width: w, height: h,
                          viewBox: "0 0 " + w + " " + h, role: "img" });
    var row = holder.closest("tr");
    el("title", {}, svg).textContent = row.cells[0].textContent + " " +
      row.cells[1].textContent + ": " + (x.length - 3) + " samples, median " +
      row.cells[2].textContent;
    el("rect", { x: x[0], y: 2, width: Math.max(x[1] - x[0], 1).toFixed(1),
                 height: h - 4, fill: "#9ecae1" }, svg);
    var g = el("g", { fill: "#333", "fill-opacity": "0.6" }, svg);
    x.slice(3).forEach(function (cx) { el("circle", { cx: cx, cy: h / 2, r: 1.6 }, g); });
    el("rect", { x: (x[2] - 1).toFixed(1), y: 0, width: 2, height: h, fill: "#d62728" }, svg);
    // Into the box, whose size the page fixed: the table around it needs no new layout.
    holder.removeAttribute("data-s");
    holder.appendChild(svg);
  }
  // An open table's plots now; a folded table's when it is first opened.
  Array.prototype.forEach.call(document.querySelectorAll("i[data-s]"), function (i) {
    if (!i.closest("details.lazy")) strip(i);
  });
  Array.prototype.forEach.call(document.querySelectorAll("details.lazy"), function (d) {
    d.addEventListener("toggle", function draw() {
      if (!d.open) return;
      d.removeEventListener("toggle", draw);
      Array.prototype.forEach.call(d.querySelectorAll("i[data-s]"), strip);
    });
  });
})();
