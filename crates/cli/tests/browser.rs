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
    let table = dom.split("<table class=\"results sortable\">").nth(index + 1).expect("table");
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

#[test]
fn the_report_works_in_headless_chromium() {
    let Some(chrome) = chromium() else {
        eprintln!("SKIPPED: no chromium on PATH (Debian: apt-get install chromium; .ci/run does)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let evil = "<script>alert(1)</script>";
    for label in [evil, "second"] {
        let o = run(&db, &["run", "--suite", "smoke", "--filter", "os.syscall", "--label", label]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    let page = dir.path().join("report.html");
    let o = run(&db, &["report", "1", "2", "-o", page.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let results = {
        let o = run(&db, &["export", "1", "--format", "json"]);
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        doc["results"].as_array().unwrap().len()
    };
    let url = format!("file://{}", page.display());

    // Table 0 is the comparison, table 1 the first run's os family; column 2 the median.
    for (order, ascending) in [("asc", true), ("desc", false)] {
        let (dom, log) = headless(&chrome, &["--dump-dom"], &format!("{url}#sort=1,2,{order}"));
        let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
        assert!(console.is_empty(), "console messages: {console:?}");
        assert!(!dom.contains("<script>alert(1)"), "the hostile label ran as markup");
        assert!(
            dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "the label is shown as text"
        );
        assert!(dom.contains("class=\"filter\""), "the page's script ran");
        let rows = table_rows(&dom, 1);
        assert_eq!(rows.len(), results, "every result of run 1 is in its table");
        let medians: Vec<f64> = rows.iter().map(|r| ns(&r[2])).collect();
        let sorted =
            medians.windows(2).all(|w| if ascending { w[0] <= w[1] } else { w[0] >= w[1] });
        assert!(sorted, "{order}: {medians:?}");
        let second = table_rows(&dom, 2);
        assert_eq!(second.len(), results, "run 2 has as many rows");
    }

    // A screenshot, kept for the log: a page with content is far from blank (a blank
    // 1200x1600 PNG compresses to a few KiB; this page's to well over 50 KiB).
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    headless(
        &chrome,
        &[
            "--hide-scrollbars",
            "--window-size=1200,1600",
            &format!("--screenshot={}", shot.display()),
        ],
        &url,
    );
    let size = std::fs::metadata(&shot).expect("a screenshot was written").len();
    eprintln!("screenshot of the report: {} ({} KiB)", shot.display(), size / 1024);
    assert!(size > 50 * 1024, "the screenshot looks blank ({size} bytes)");

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
