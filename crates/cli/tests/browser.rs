//! The HTML report in a real browser: headless Chromium (Debian's `chromium`, which
//! `.ci/run` installs) loads a page written by `schedlab report` and the test reads the DOM
//! after the page's script ran. Without Chromium the test says so and passes: it cannot
//! check anything there.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{run, text};

/// The Chromium binary on PATH, if any.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// Runs headless Chromium on `url` with `args`; its stdout and stderr. At most two minutes.
fn headless(chrome: &Path, args: &[&str], url: &str) -> (String, String) {
    let out = Command::new("timeout")
        .arg("120")
        .arg(chrome)
        .args([
            "--headless",
            "--no-sandbox", // CI runs as root
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("timeout(1) runs");
    assert!(out.status.success(), "chromium failed: {}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

/// The `<tbody>` of the `index`-th results table of a DOM dump, as rows of cell texts.
fn table_rows(dom: &str, index: usize) -> Vec<Vec<String>> {
    let table = dom.split("<table class=\"results sortable").nth(index + 1).expect("table");
    let body = table.split("<tbody>").nth(1).unwrap().split("</tbody>").next().unwrap();
    body.split("<tr")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let inner = &cell[cell.find('>').unwrap() + 1..];
                    inner.split("</td>").next().unwrap().to_string()
                })
                .collect()
        })
        .collect()
}

/// A median cell (`1.234 µs`, `567 ns`) in ns.
fn ns(cell: &str) -> f64 {
    let mut parts = cell.split_whitespace();
    let v: f64 = parts.next().unwrap().parse().unwrap_or_else(|_| panic!("a number: {cell}"));
    v * match parts.next().unwrap_or("ns") {
        "ns" => 1.0,
        "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => panic!("unit {other} in {cell}"),
    }
}

/// Which `<table class="results sortable ...">` of a DOM dump (counted from 0 in page order,
/// as the page's `#sort=` links count) has a caption starting with `caption`, the `nth`
/// such table.
fn table_index(dom: &str, caption: &str, nth: usize) -> usize {
    dom.split("<table class=\"results sortable")
        .skip(1)
        .enumerate()
        .filter(|(_, t)| {
            // Past the rest of the tag (its number-column classes).
            let t = &t[t.find('>').map_or(0, |i| i + 1)..];
            t.trim_start().starts_with(&format!("<caption>{caption}"))
        })
        .nth(nth)
        .unwrap_or_else(|| panic!("no table {caption:?} #{nth}"))
        .0
}

/// A script that measures every text box of the page once it is laid out — each line of
/// each HTML text node (a Range's client rects) and each SVG `<text>` — and writes the
/// pairs that overlap by more than a pixel each way into `<pre id="overlaps">` as JSON.
const OVERLAP_SCRIPT: &str = r#"<script>
(function () {
  // Text inside a closed <details> (other than its summary) is not shown, though
  // Chromium still lays it out.
  function hidden(el) {
    for (var d = el.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) {
      var s = el.closest("summary");
      if (!d.open && !(s && s.parentElement === d)) return true;
    }
    return false;
  }
  var boxes = [];
  var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  var node;
  while ((node = walker.nextNode())) {
    var el = node.parentElement;
    if (!node.textContent.trim() || el.closest("svg, script, style") || hidden(el)) continue;
    var range = document.createRange();
    range.selectNodeContents(node);
    Array.prototype.forEach.call(range.getClientRects(), function (r) {
      if (r.width > 0 && r.height > 0) boxes.push([r.left, r.top, r.right, r.bottom, node.textContent.trim().slice(0, 60)]);
    });
  }
  document.querySelectorAll("svg text").forEach(function (t) {
    if (hidden(t)) return;
    var r = t.getBoundingClientRect();
    if (r.width > 0 && r.height > 0) boxes.push([r.left, r.top, r.right, r.bottom, t.textContent.slice(0, 60)]);
  });
  var bad = [];
  for (var i = 0; i < boxes.length; i++) {
    for (var j = i + 1; j < boxes.length; j++) {
      var a = boxes[i], b = boxes[j];
      var w = Math.min(a[2], b[2]) - Math.max(a[0], b[0]);
      var h = Math.min(a[3], b[3]) - Math.max(a[1], b[1]);
      if (w > 1 && h > 1) bad.push([a[4], b[4], Math.round(w), Math.round(h)]);
    }
  }
  var pre = document.createElement("pre");
  pre.id = "overlaps";
  pre.textContent = JSON.stringify({ boxes: boxes.length, overlaps: bad.slice(0, 30), count: bad.length });
  document.body.appendChild(pre);
})();
</script>"#;

/// The text boxes of `page` that overlap in a `width`-pixel-wide window: the page's copy
/// with [`OVERLAP_SCRIPT`] at the end of its body, loaded in Chromium. Returns the number
/// of text boxes measured and the overlapping pairs.
fn overlaps(chrome: &Path, page: &Path, width: u32) -> (u64, Vec<serde_json::Value>) {
    let html = std::fs::read_to_string(page).unwrap();
    let probe = page.with_extension(format!("overlaps-{width}.html"));
    std::fs::write(&probe, html.replace("</body>", &format!("{OVERLAP_SCRIPT}</body>"))).unwrap();
    let size = format!("--window-size={width},1000");
    let (dom, _) = headless(chrome, &["--dump-dom", &size], &format!("file://{}", probe.display()));
    let json = dom
        .split("<pre id=\"overlaps\">")
        .nth(1)
        .and_then(|r| r.split("</pre>").next())
        .unwrap_or_else(|| {
            panic!("the measuring script ran: {}", &dom[dom.len().saturating_sub(500)..])
        });
    let doc: serde_json::Value =
        serde_json::from_str(&json.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
            .unwrap();
    (doc["boxes"].as_u64().unwrap(), doc["overlaps"].as_array().unwrap().clone())
}

/// A screenshot of `url`'s first `width`×`height` pixels into `name` under cargo's test
/// directory, kept for the log; asserts it is far from blank (a blank PNG of that size
/// compresses to a few KiB).
fn screenshot(chrome: &Path, url: &str, name: &str, (width, height): (u32, u32)) -> PathBuf {
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_file(&shot);
    headless(
        chrome,
        &[
            "--hide-scrollbars",
            &format!("--window-size={width},{height}"),
            &format!("--screenshot={}", shot.display()),
        ],
        url,
    );
    let size = std::fs::metadata(&shot).expect("a screenshot was written").len();
    eprintln!("screenshot: {} ({} KiB)", shot.display(), size / 1024);
    assert!(size > 20 * 1024, "the screenshot {name} looks blank ({size} bytes)");
    shot
}

#[test]
fn the_report_works_in_headless_chromium() {
    let Some(chrome) = chromium() else {
        eprintln!("SKIPPED: no chromium on PATH (Debian: apt-get install chromium; .ci/run does)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let evil = "<script>alert(1)</script>";
    // Two runs of some headline probes (the second's summary is set against the first),
    // then a timeline with marks (scenario 6: "starts yielding").
    let filter = "os.syscall,os.pipe.latency,threads.switch";
    for label in [evil, "second"] {
        let o = run(&db, &["run", "--suite", "smoke", "--filter", filter, "--label", label]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    let o = run(&db, &["timeline", "yield", "--label", "timeline"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let page = dir.path().join("report.html");
    let o = run(&db, &["report", "1", "2", "-o", page.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let export = |id: &str| -> Vec<serde_json::Value> {
        let o = run(&db, &["export", id, "--format", "json"]);
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        doc["results"].as_array().unwrap().clone()
    };
    let os_results =
        export("1").iter().filter(|r| r["probe"].as_str().unwrap().starts_with("os.")).count();
    let url = format!("file://{}", page.display());

    // The first run's os table, sorted by its median (column 2) by a #sort= link.
    let (dom, _) = headless(&chrome, &["--dump-dom"], &url);
    let first_os = table_index(&dom, "os (", 0);
    for (order, ascending) in [("asc", true), ("desc", false)] {
        let (dom, log) =
            headless(&chrome, &["--dump-dom"], &format!("{url}#sort={first_os},2,{order}"));
        let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
        assert!(console.is_empty(), "console messages: {console:?}");
        assert!(!dom.contains("<script>alert(1)"), "the hostile label ran as markup");
        assert!(
            dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "the label is shown as text"
        );
        assert!(dom.contains("class=\"filter\""), "the page's script ran");
        let rows = table_rows(&dom, first_os);
        assert_eq!(rows.len(), os_results, "every os result of run 1 is in its table");
        let medians: Vec<f64> = rows.iter().map(|r| ns(&r[2])).collect();
        let sorted =
            medians.windows(2).all(|w| if ascending { w[0] <= w[1] } else { w[0] >= w[1] });
        assert!(sorted, "{order}: {medians:?}");
        let second = table_rows(&dom, table_index(&dom, "os (", 1));
        assert_eq!(second.len(), os_results, "run 2 has as many rows");
    }

    // Run 2's own page opens with its summary: every figure is the median stored in the
    // database (exactly, in its data; to the digits shown, in its text), set against run 1.
    let summary_page = dir.path().join("summary.html");
    let o = run(&db, &["report", "2", "-o", summary_page.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let summary_url = format!("file://{}", summary_page.display());
    let (dom, _) = headless(&chrome, &["--dump-dom"], &summary_url);
    let main = dom.split("<main>").nth(1).unwrap();
    assert!(main.trim_start().starts_with("<section id=\"summary\""), "the summary comes first");
    let stored = export("2");
    let figures: Vec<&str> = main.split("<tr data-probe=\"").skip(1).collect();
    assert!(
        figures.len() >= 5,
        "null syscall, pipe round trip, three thread switches: {}",
        figures.len()
    );
    for f in &figures {
        let attr = |name: &str| {
            let at = f.find(&format!("data-{name}=\"")).map(|i| i + name.len() + 7);
            let from = at.map_or(*f, |i| &f[i..]);
            if name == "probe" {
                f.split('"').next().unwrap()
            } else {
                from.split('"').next().unwrap()
            }
        };
        let (probe, params, median) = (attr("probe"), attr("params"), attr("median"));
        let want: serde_json::Map<String, serde_json::Value> = params
            .split(',')
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), serde_json::Value::String(v.to_string()))
            })
            .collect();
        let row = stored
            .iter()
            .find(|r| r["probe"] == probe && r["params"].as_object() == Some(&want))
            .unwrap_or_else(|| panic!("{probe} {params} is not in the database"));
        let db_median = row["median"].as_f64().unwrap();
        // serde_json's default float parsing may be off by an ulp: equal to 1e-12.
        let page_median = median.parse::<f64>().unwrap();
        assert!(
            (page_median - db_median).abs() <= 1e-12 * db_median.abs(),
            "{probe} {params}: {page_median} against {db_median}"
        );
        let shown = f.split("<td class=\"num\">").nth(1).unwrap().split("</td>").next().unwrap();
        let scale = if row["unit"] == "us" { 1e3 } else { 1.0 };
        let rel = (ns(shown) - db_median * scale).abs() / (db_median * scale);
        assert!(rel < 0.005, "{probe} {params}: shown {shown}, stored {db_median}");
        assert!(f.contains("#1: ×"), "{probe}: set against the previous run, #1");
    }

    // No text over text: the summary page at a desktop and a phone width, the comparison
    // page, and the timeline page (its figure's axis title once sat on its legend).
    let timeline_page = dir.path().join("timeline.html");
    let o = run(&db, &["report", "3", "-o", timeline_page.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let mut counted = Vec::new();
    for (p, width) in
        [(&summary_page, 1200), (&summary_page, 400), (&page, 1200), (&timeline_page, 1200)]
    {
        let (boxes, bad) = overlaps(&chrome, p, width);
        eprintln!("{}: {boxes} text boxes at {width} px", p.display());
        assert!(boxes > 50, "the page was measured: {boxes} boxes");
        assert!(bad.is_empty(), "{} at {width} px: text over text: {bad:#?}", p.display());
        counted.push(boxes);
    }
    // A narrow window wraps lines; it does not squeeze a table's columns to a letter a
    // line (each letter is then a text box of its own: 1,579 boxes against 286 once).
    assert!(
        counted[1] < 2 * counted[0],
        "at 400 px {} text boxes, at 1200 px {}",
        counted[1],
        counted[0]
    );

    // Screenshots, kept for the log: the first screen, and the timeline figure.
    screenshot(&chrome, &summary_url, "report-first-screen.png", (1200, 900));
    let html = std::fs::read_to_string(&timeline_page).unwrap();
    let timelines = html.split("<section id=\"timelines\"").nth(1).expect("a timelines section");
    let figure = timelines.split("<figure>").nth(1).unwrap().split("</figure>").next().unwrap();
    assert!(figure.starts_with("<svg") && figure.contains("time (ms)"), "the timeline's picture");
    let alone = dir.path().join("timeline-figure.html");
    std::fs::write(
        &alone,
        format!("<!DOCTYPE html><html><body style=\"margin:0\">{figure}</body></html>"),
    )
    .unwrap();
    screenshot(&chrome, &format!("file://{}", alone.display()), "report-timeline.png", (1000, 400));

    // How long a page the size of the quick suite's takes to open, beside an empty page in
    // the same sitting (printed for the log: speed is for benchmarks, not assertions).
    let big = dir.path().join("quick-sized.html");
    std::fs::write(&big, quick_sized_page()).unwrap();
    let empty = dir.path().join("empty.html");
    std::fs::write(&empty, "<!DOCTYPE html><html><body>x</body></html>").unwrap();
    let mut times = Vec::new();
    for f in [&empty, &big, &empty, &big] {
        let t = std::time::Instant::now();
        let (dom, _) = headless(&chrome, &["--dump-dom"], &format!("file://{}", f.display()));
        assert!(dom.contains("</html>"));
        times.push(t.elapsed().as_secs_f64());
    }
    // Every open table's rows have their plots drawn by the script from their codes as the
    // page opens (40 os rows, 60 thread rows); the folded table's wait for it to be opened.
    let (dom, _) = headless(&chrome, &["--dump-dom"], &format!("file://{}", big.display()));
    for (family, rows) in [("os (", 40), ("threads (", 60)] {
        let table = dom
            .split("<table class=\"results sortable")
            .nth(table_index(&dom, family, 0) + 1)
            .unwrap()
            .split("</table>")
            .next()
            .unwrap();
        assert_eq!(table.matches("<svg").count(), rows, "plots drawn in the {family}) table");
        assert_eq!(table.matches("<circle").count(), rows * 11, "a dot per sample");
        assert!(!table.contains("data-s="), "every code of the {family}) table was drawn");
    }
    let folded = dom.split("<details class=\"lazy\"").nth(1).expect("a folded family");
    assert!(!folded.contains("<svg"), "a folded table's plots wait for it to be opened");
    // The memory family's folded table draws its 2,308 rows' plots when opened.
    let opened = dir.path().join("quick-sized-opened.html");
    let page = quick_sized_page().replace(
        "</body>",
        "<script>document.querySelectorAll('details.lazy').forEach(function (d) { d.open = true; });</script></body>",
    );
    std::fs::write(&opened, page).unwrap();
    let (dom, _) = headless(
        &chrome,
        &["--dump-dom", "--virtual-time-budget=5000"],
        &format!("file://{}", opened.display()),
    );
    let folded = dom.split("<details class=\"lazy\"").nth(1).expect("a folded family");
    let drawn = folded.matches("<svg").count();
    assert_eq!(drawn, 2308, "plots drawn in the opened folded table");
    assert!(!folded.contains("data-s="), "every code was replaced by its plot");
    eprintln!(
        "a quick-suite-sized page ({} KiB, 2,408 results) opened in {:.2} s and {:.2} s, an empty page in {:.2} s and {:.2} s",
        std::fs::metadata(&big).unwrap().len() / 1024,
        times[1],
        times[3],
        times[0],
        times[2]
    );
}

/// A page with as many results as the quick suite (40 OS rows, 60 thread rows, 2,308
/// memory points), 11 samples each.
fn quick_sized_page() -> String {
    use schedlab_measure::machine::Machine;
    use schedlab_measure::model::{Measurement, Params, Run, RunMeta, Sample, Unit};
    let mut meta = RunMeta::starting("quick", Machine::fingerprint(), ("0.1.0", "test"));
    meta.id = 1;
    let sample =
        |v: f64| Sample { iters: 1, elapsed_ns: 1, value: v, other_cpu_ns: None, migrated: false };
    let result = |probe: &str, i: usize| {
        Measurement::of_samples(
            probe,
            Params::new().with("size", i),
            Unit::Nanos,
            (0..11).map(|k| sample(100.0 + (i * 7 + k) as f64)).collect(),
            0.1,
        )
    };
    let mut results: Vec<Measurement> = (0..40).map(|i| result("os.x", i)).collect();
    results.extend((0..60).map(|i| result("threads.y", i)));
    results.extend((0..2308).map(|i| result("mem.z", i)));
    let run = Run { meta, results, warnings: vec![] };
    schedlab_report::html::page(&[run], 0, &[], "0.1.0")
}
