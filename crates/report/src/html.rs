//! The report people open: one self-contained HTML page for one run or several.
//!
//! Everything the page shows comes from the same views as the terminal and Markdown (the
//! run header, the results and comparison tables, the memory lab's sections and charts, the
//! timeline lanes), rendered as HTML; the additions are the first screen (`html/first.rs`:
//! the run's summary, or what changed beyond noise), the raw-sample strip plots and the page
//! around them. The template (`html/page.html`), its styles (`html/style.css`) and its one
//! script (`html/sort.js`: sorting, filtering, and drawing every results table's raw-sample
//! plots from the codes in their cells — a folded table's when it is first opened; every
//! other table and picture is there without it, and the page says so when scripts are off)
//! live beside
//! this file as readable files and are embedded at build time: the page needs no network and
//! no files beside it.
//!
//! Every string that came from the machine or the user (host names, labels, parameters,
//! notes, kernel strings, scenario names) goes through [`crate::svg::escape`].

use base64::Engine as _;
use schedlab_measure::model::{Measurement, Outcome, Run};
use schedlab_trace::Timeline;

use crate::svg::{self, escape};
use crate::units::human;
use crate::{lanes, mem, summary, views};

mod first;

use first::{changes_html, summary_html};

const TEMPLATE: &str = include_str!("html/page.html");
const STYLE: &str = include_str!("html/style.css");
const SCRIPT: &str = include_str!("html/sort.js");

/// Above this many results a family's table starts folded (`<details>`), and its rows'
/// sample plots (codes in their cells, [`plot_code`]) are drawn by the script when it is
/// first opened rather than when the page opens: the memory lab's 2,400-row sweep.
const FOLD_ABOVE: usize = 200;

/// A stored timeline of one of the runs.
#[derive(Debug, Clone)]
pub struct RunTimeline {
    /// The run it belongs to.
    pub run_id: i64,
    /// The recorder (`sampling`, `kernel`, `rt`).
    pub recorder: String,
    /// The timeline.
    pub timeline: Timeline,
}

/// The page for `runs` (compared against `runs[baseline]` when there are several) and the
/// timelines stored with them.
pub fn page(runs: &[Run], baseline: usize, timelines: &[RunTimeline], version: &str) -> String {
    page_against(runs, baseline, timelines, &[], version)
}

/// [`page`], with each run's summary set against `previous[i]`, the previous run of the same
/// host (found by the caller; `previous` may be shorter than `runs`).
///
/// The page leads with the answer and lets a reader drill down (issue 28): first each run's
/// summary ([`crate::summary`]: the headline figures against the seed machines and the last
/// run, the thread systems' chart, the seeds' verdicts and one line about noise) — or, for
/// several runs, only what changed beyond noise — then the machines and warnings, then one
/// section per family of probes, its chart first and its table after, each row with its raw
/// samples' plot.
pub fn page_against(
    runs: &[Run],
    baseline: usize,
    timelines: &[RunTimeline],
    previous: &[Option<Run>],
    version: &str,
) -> String {
    let title = match runs {
        [one] => format!("schedlab run {}", one.meta.display_name()),
        _ => format!(
            "schedlab: {}",
            runs.iter().map(|r| r.meta.display_name()).collect::<Vec<_>>().join(" vs ")
        ),
    };
    let mut nav = Vec::new();
    let mut body = String::new();
    if runs.len() >= 2 {
        section(
            &mut body,
            &mut nav,
            "changes",
            "Changed beyond noise",
            &changes_html(runs, baseline),
        );
    }
    for (i, run) in runs.iter().enumerate() {
        let prev = previous.get(i).and_then(|p| p.as_ref());
        let s = summary::summarise(run, prev);
        if s.figures.is_empty() && s.verdicts.is_empty() && s.noise.is_none() {
            continue;
        }
        let (id, heading) = match runs.len() {
            1 => ("summary".to_string(), "This machine in one look".to_string()),
            _ => (format!("summary-{i}"), format!("Summary of {}", run.meta.display_name())),
        };
        section(&mut body, &mut nav, &id, &heading, &summary_html(&s, i));
    }
    section(&mut body, &mut nav, "runs", "Runs and machines", &runs_html(runs));
    let warnings = warnings_html(runs);
    if !warnings.is_empty() {
        section(&mut body, &mut nav, "warnings", "Warnings", &warnings);
    }
    if runs.len() >= 2 {
        section(&mut body, &mut nav, "comparison", "Comparison", &comparison_html(runs, baseline));
        if let Some(t) = crate::sched::verdicts_across(runs) {
            let inner = format!(
                "<p>{}</p>\n<div class=\"scroll\">{}</div>\n",
                escape(crate::sched::DEFINITION),
                t.to_html("Seed 001's verdicts, run by run", None)
            );
            section(&mut body, &mut nav, "verdicts", "Seed 001's verdicts, run by run", &inner);
        }
    }
    for (i, run) in runs.iter().enumerate() {
        for (f, inner) in families_html(run) {
            let id = format!("results-{i}-{f}");
            let heading = match runs.len() {
                1 => format!("{f} results"),
                _ => format!("{f}: results of {}", run.meta.display_name()),
            };
            section(&mut body, &mut nav, &id, &heading, &inner);
        }
    }
    let tables: Vec<(String, crate::coop::CoopTable)> = runs
        .iter()
        .filter_map(|r| Some((r.meta.display_name(), crate::coop::analyse(r)?)))
        .collect();
    if let Some(chart) = crate::coop::machines_chart(&tables) {
        let inner = format!(
            "<figure>{chart}<figcaption>Figure 2 of the article: the same methods on each \
             run's machine</figcaption></figure>\n"
        );
        section(
            &mut body,
            &mut nav,
            "coop-machines",
            "Cooperative against preemptive, runs compared",
            &inner,
        );
    }
    for (i, run) in runs.iter().enumerate() {
        let rows: Vec<&Measurement> =
            run.results.iter().filter(|m| crate::crosscheck::is_row(m)).collect();
        if rows.is_empty() {
            continue;
        }
        let mut t = crate::crosscheck::table();
        for m in &rows {
            t.row(crate::crosscheck::cells(m));
        }
        let owned: Vec<Measurement> = rows.iter().map(|m| (*m).clone()).collect();
        let inner = format!(
            "<div class=\"scroll\">{}</div>\n<pre>{}</pre>\n",
            t.to_html("schedlab beside the reference tools", None),
            escape(&crate::crosscheck::explanation(&owned))
        );
        let (id, heading) = match runs.len() {
            1 => ("crosscheck".to_string(), "Crosscheck".to_string()),
            _ => (format!("crosscheck-{i}"), format!("Crosscheck of {}", run.meta.display_name())),
        };
        section(&mut body, &mut nav, &id, &heading, &inner);
    }
    if !timelines.is_empty() {
        section(&mut body, &mut nav, "timelines", "Timelines", &timelines_html(runs, timelines));
    }
    wrap(&title, &nav, &body, version)
}

/// The page around `body`: its title, the navigation `nav` (one `<li>` per section, as
/// [`section`] makes them), the styles and the script.
pub(crate) fn wrap(title: &str, nav: &[String], body: &str, version: &str) -> String {
    TEMPLATE
        .replace("{{style}}", &style())
        .replace("{{script}}", &script())
        .replace("{{nav}}", &nav.concat())
        .replace("{{version}}", &escape(version))
        .replace("{{title}}", &escape(title))
        // Last: the body may hold anything, including text that looks like a placeholder.
        .replace("{{body}}", body)
}

/// The page's styles, given the strip plots' size from [`svg`] for the boxes they are drawn
/// into.
fn style() -> String {
    let (w, h, _) = svg::STRIP_SIZE;
    STYLE.replace("{{strip_w}}", &w.to_string()).replace("{{strip_h}}", &h.to_string())
}

/// The page's script, given the strip plots' alphabet and size from [`svg`] so that the
/// codes and their drawing share one definition.
fn script() -> String {
    let (w, h, pad) = svg::STRIP_SIZE;
    SCRIPT
        .replace("{{strip_alphabet}}", svg::STRIP_CODE_ALPHABET)
        .replace("{{strip_size}}", &format!("{w} {h} {pad}"))
}

/// Appends a section with `id`, `heading` and the HTML `inner` to `body`, and its link to
/// `nav`.
pub(crate) fn section(
    body: &mut String,
    nav: &mut Vec<String>,
    id: &str,
    heading: &str,
    inner: &str,
) {
    let (id, heading) = (escape(id), escape(heading));
    nav.push(format!("<li><a href=\"#{id}\">{heading}</a></li>"));
    body.push_str(&format!(
        "<section id=\"{id}\" aria-labelledby=\"{id}-h\">\n<h2 id=\"{id}-h\">{heading}</h2>\n{inner}</section>\n"
    ));
}

fn runs_html(runs: &[Run]) -> String {
    let mut out = String::new();
    for r in runs {
        out.push_str(&format!(
            "<div class=\"run\"><h3>{}</h3><ul>",
            escape(&r.meta.display_name())
        ));
        for line in views::run_header(&r.meta) {
            out.push_str(&format!("<li>{}</li>", escape(&line)));
        }
        out.push_str("</ul>");
        if !r.meta.machine.doctor.is_empty() {
            // A list, not a table: the page's tables are the results, counted and sorted.
            out.push_str("<details><summary>kernel and platform (schedlab doctor)</summary><ul>");
            for f in &r.meta.machine.doctor {
                out.push_str(&format!(
                    "<li>{}: {} <small>({})</small></li>",
                    escape(&f.name),
                    escape(&f.reading.text()),
                    escape(&f.source)
                ));
            }
            out.push_str("</ul></details>");
        }
        out.push_str("</div>\n");
    }
    out
}

fn warnings_html(runs: &[Run]) -> String {
    let mut out = String::new();
    for r in runs.iter().filter(|r| !r.warnings.is_empty()) {
        out.push_str(&format!(
            "<h3>{}</h3><ul class=\"warnings\">",
            escape(&r.meta.display_name())
        ));
        // A warning kind's line (with its advice), then its results folded: a noisy run
        // can name hundreds.
        let mut details: Vec<String> = Vec::new();
        let flush = |out: &mut String, details: &mut Vec<String>| {
            if !details.is_empty() {
                out.push_str(&format!(
                    "<details><summary>{} result{}</summary><ul>{}</ul></details>",
                    details.len(),
                    if details.len() == 1 { "" } else { "s" },
                    details.concat()
                ));
                details.clear();
            }
        };
        let mut open = false;
        for line in views::warning_lines(&r.warnings, usize::MAX) {
            match line.strip_prefix("    ") {
                Some(detail) => details.push(format!("<li>{}</li>", escape(detail))),
                None => {
                    flush(&mut out, &mut details);
                    if open {
                        out.push_str("</li>");
                    }
                    out.push_str(&format!("<li>{}", escape(&line)));
                    open = true;
                }
            }
        }
        flush(&mut out, &mut details);
        if open {
            out.push_str("</li>");
        }
        out.push_str("</ul>\n");
    }
    out
}

fn comparison_html(runs: &[Run], baseline: usize) -> String {
    let caption = format!("against {} (the baseline)", runs[baseline].meta.display_name());
    let mut out = String::from(
        "<p>Median ± half-width of its 95% interval; ratio = run / baseline; \
         \"within noise\" when the intervals overlap.</p>\n<div class=\"scroll\">",
    );
    out.push_str(&views::compare_table(runs, baseline).to_html(&caption, None));
    out.push_str("</div>\n");
    // A chart of the ratios per run, for the families short enough to chart (the memory
    // sweep is compared in its table).
    let rows = views::comparison_rows(runs, baseline);
    let count = |f: &str| rows.iter().filter(|r| family(&r.probe) == f).count();
    for (i, run) in runs.iter().enumerate().filter(|(i, _)| *i != baseline) {
        let bars: Vec<(String, f64, String)> = rows
            .iter()
            .filter(|r| count(family(&r.probe)) <= FOLD_ABOVE)
            .filter_map(|r| {
                let v = r.verdicts[i]?;
                Some((format!("{} {}", r.probe, r.params), v.ratio, views::verdict_text(&v)))
            })
            .collect();
        if bars.is_empty() {
            continue;
        }
        let title =
            format!("{} against {}", run.meta.display_name(), runs[baseline].meta.display_name());
        out.push_str(&format!(
            "<figure>{}<figcaption>{}</figcaption></figure>\n",
            crate::svg::ratios(&title, &bars, "median / baseline median (log scale)"),
            escape(&title)
        ));
    }
    out
}

/// The family of a probe: what its id starts with (`os`, `threads`, `rt`, `mem`, `sched`).
fn family(probe: &str) -> &str {
    probe.split('.').next().unwrap_or(probe)
}

/// Each family of `run`'s results (in measurement order) as (family, HTML): its chart or
/// charts first — the thread systems for `threads`, seed 000's table and figures for
/// `sched`, the memory lab for `mem`, the medians of its time rows for the others — then its
/// table, each row with its raw samples' plot beside the median.
fn families_html(run: &Run) -> Vec<(String, String)> {
    let mut families: Vec<&str> = Vec::new();
    for m in run.results.iter().filter(|m| !crate::crosscheck::is_row(m)) {
        let f = family(&m.probe);
        if !families.contains(&f) {
            families.push(f);
        }
    }
    let mut out = Vec::new();
    for f in families {
        let rows: Vec<&Measurement> = run
            .results
            .iter()
            .filter(|m| family(&m.probe) == f && !crate::crosscheck::is_row(m))
            .collect();
        let mut html = match f {
            "threads" => thread_systems_html(run),
            "sched" => sched_html(run),
            "mem" => memory_html(run),
            _ => family_chart(f, &rows, &run.meta.display_name()),
        }
        .unwrap_or_default();
        html.push_str(&family_table(f, &rows));
        out.push((f.to_string(), html));
    }
    out
}

/// A family's time rows (ns or µs per operation) as bars on a log axis, one per result, for
/// families of at most [`FOLD_ABOVE`] rows.
fn family_chart(f: &str, rows: &[&Measurement], name: &str) -> Option<String> {
    use schedlab_measure::model::Unit;
    if rows.len() > FOLD_ABOVE {
        return None;
    }
    let groups: Vec<svg::BarGroup> = rows
        .iter()
        .filter(|m| matches!(m.unit, Unit::Nanos | Unit::Micros))
        .filter_map(|m| match (&m.outcome, &m.summary) {
            (Outcome::Ok, Some(s)) if s.median > 0.0 => {
                let ns = if m.unit == Unit::Micros { s.median * 1e3 } else { s.median };
                let label = format!("{} {}", m.probe, m.params.key());
                Some(svg::BarGroup {
                    label: label.trim_end().to_string(),
                    bars: vec![Some((ns, human(s.median, m.unit)))],
                })
            }
            _ => None,
        })
        .collect();
    if groups.len() < 2 {
        return None;
    }
    let title = format!("{f}: median time per operation");
    let chart = svg::bars(&title, &[""], &groups, "ns per operation (log scale)");
    Some(format!(
        "<figure>{chart}<figcaption>{} of {}: every time-per-operation result (rates and \
         bandwidths are in the table)</figcaption></figure>\n",
        escape(&title),
        escape(name)
    ))
}

/// A family's results table, each row's raw-sample plot as a code the script draws
/// ([`plot_code`]), the notes every row shares said once above it; above [`FOLD_ABOVE`] rows
/// it starts folded, its plots drawn when it is first opened.
fn family_table(f: &str, rows: &[&Measurement]) -> String {
    let shared = views::shared_notes(rows);
    let mut t = views::result_table();
    for m in rows {
        let notes = shared.iter().find(|(p, _)| *p == m.probe).map_or(&[][..], |s| &s.1);
        t.row(views::result_cells_except(m, notes));
    }
    let caption = format!("{f} ({} results)", rows.len());
    let plots: Vec<String> = rows.iter().map(|m| plot_code(m)).collect();
    let mut out = String::new();
    for (probe, notes) in &shared {
        let notes: Vec<String> = notes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!(
            "<p class=\"key\" data-probe=\"{p}\" data-notes=\"{n}\">Notes of every measured {p} \
             row below: {n}</p>\n",
            p = escape(probe),
            n = escape(&notes.join(" "))
        ));
    }
    // The plot right after the median and its interval, where the eye is.
    out.push_str(&format!(
        "<div class=\"scroll\">{}</div>",
        t.to_html(&caption, Some(("raw samples", &plots, 4)))
    ));
    if rows.len() > FOLD_ABOVE {
        return format!(
            "<details class=\"lazy\"><summary>{} — folded: {} rows</summary>{out}</details>\n",
            escape(f),
            rows.len(),
        );
    }
    out.push('\n');
    out
}

/// A row's raw-sample plot for the page's script to draw ([`svg::strip_code`] in `data-s`;
/// its accessible name is made from the row's probe, parameters and median). Empty when the
/// result has no samples.
fn plot_code(m: &Measurement) -> String {
    match (&m.outcome, &m.summary) {
        (Outcome::Ok, Some(s)) => {
            let values: Vec<f64> = m.samples.iter().map(|x| x.value).collect();
            let code = svg::strip_code(&values, s.median, (s.ci_low, s.ci_high));
            if code.is_empty() {
                return code;
            }
            format!("<i data-s=\"{}\"></i>", escape(&code))
        }
        _ => String::new(),
    }
}

/// The thread probes' os, rt and tokio medians side by side, with the C program's rows
/// under glibc (pthread-os) and libschedlab_pthread.so (pthread-rt) where a probe has
/// them, one group per probe and parameter set (log axis: kernel threads take
/// microseconds where user threads take nanoseconds).
fn thread_systems_html(run: &Run) -> Option<String> {
    const BACKENDS: [&str; 5] = ["os", "rt", "tokio", "pthread-os", "pthread-rt"];
    let mut groups: Vec<crate::svg::BarGroup> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for m in run.results.iter().filter(|m| family(&m.probe) == "threads") {
        let Some(backend) = m.params.get("backend") else { continue };
        let Some(b) = BACKENDS.iter().position(|x| *x == backend) else { continue };
        // `io=std` (threads.net.echo's rt rows) is the plain std I/O the os rows use too,
        // so those rows share a group; another `io` is a group of its own.
        let rest: Vec<String> = m
            .params
            .0
            .iter()
            .filter(|(k, v)| k != "backend" && !(k == "io" && v == "std"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let key = format!("{} {}", m.probe, rest.join(","));
        let gi = match keys.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                keys.push(key.clone());
                groups.push(crate::svg::BarGroup { label: key, bars: vec![None; BACKENDS.len()] });
                groups.len() - 1
            }
        };
        if let (Outcome::Ok, Some(s), schedlab_measure::model::Unit::Nanos) =
            (&m.outcome, &m.summary, m.unit)
        {
            groups[gi].bars[b] = Some((s.median, crate::units::human(s.median, m.unit)));
        }
    }
    if groups.is_empty() {
        return None;
    }
    let chart = crate::svg::bars(
        "Thread systems: median per operation",
        &BACKENDS,
        &groups,
        "ns per operation (log scale)",
    );
    Some(format!(
        "<p>Kernel threads (os), schedlab-rt user threads (rt) and tokio tasks on the same \
         probes, and one C program under glibc's threads (pthread-os) and under \
         libschedlab_pthread.so (pthread-rt); a missing bar is a skipped, failed or \
         unmeasured row (its reason is in the results table).</p>\n<figure>{chart}<figcaption>Thread systems of {}</figcaption></figure>\n",
        escape(&run.meta.display_name())
    ))
}

/// The sched family's pictures: seed 000's table and its Figures 1 and 3 ([`coop_html`]),
/// seed 001's verdicts, the wake-up latency, then the locks and loaders (`locks.rs`).
fn sched_html(run: &Run) -> Option<String> {
    let mut out = coop_html(run).unwrap_or_default();
    let judged = crate::sched::judged(run);
    if !judged.is_empty() {
        out.push_str(&format!("<p>{}</p>\n", escape(crate::sched::DEFINITION)));
        for line in crate::sched::disturbed_lines(&judged) {
            out.push_str(&format!("<p class=\"verdict\"><strong>{}</strong></p>\n", escape(&line)));
        }
        out.push_str("<div class=\"scroll\">");
        out.push_str(
            &crate::sched::verdict_table(&judged).to_html("Seed 001's verdicts, per method", None),
        );
        out.push_str("</div>\n");
    }
    if let (Some(chart), Some(t)) =
        (crate::sched::wakeup_chart(run), crate::sched::wakeup_table(run))
    {
        out.push_str(&format!(
            "<figure>{chart}<figcaption>Wake-up latency of {}: how late a thread woken every 1 ms \
             runs (cyclictest's question; the crosscheck compares its mean)</figcaption></figure>\n",
            escape(&run.meta.display_name())
        ));
        out.push_str("<div class=\"scroll\">");
        out.push_str(&t.to_html("Wake-up latency", None));
        out.push_str("</div>\n");
    }
    if let Some(locks) = crate::locks::html(run) {
        out.push_str(&locks);
    }
    (!out.is_empty()).then_some(out)
}

fn coop_html(run: &Run) -> Option<String> {
    let t = crate::coop::analyse(run)?;
    let mut out = format!("<p>{}</p>\n", escape(crate::coop::LEGEND));
    out.push_str(&crate::coop::table(&t).to_html("Seed 000's table: normalized scores", None));
    for (caption, chart) in crate::coop::charts(&run.meta.display_name(), &t) {
        out.push_str(&format!(
            "<figure>{chart}<figcaption>{}</figcaption></figure>\n",
            escape(&caption)
        ));
    }
    Some(out)
}

fn memory_html(run: &Run) -> Option<String> {
    if !run.results.iter().any(|m| m.probe == mem::CLEAR) {
        return None;
    }
    let a = mem::analyse(&run.results, &[])?;
    let mut out = String::new();
    for s in mem::sections(&a) {
        out.push_str("<div class=\"scroll\">");
        out.push_str(&s.table.to_html(&s.title, None));
        out.push_str("</div>\n");
        for n in &s.notes {
            out.push_str(&format!("<p>{}</p>\n", escape(n)));
        }
    }
    for (name, chart) in mem::charts(&a, &run.meta.display_name()) {
        out.push_str(&format!(
            "<figure>{}<figcaption>{}</figcaption></figure>\n",
            chart.to_svg(),
            escape(&name)
        ));
    }
    Some(out)
}

fn timelines_html(runs: &[Run], timelines: &[RunTimeline]) -> String {
    let mut out = String::new();
    for (i, rt) in timelines.iter().enumerate() {
        let t = &rt.timeline;
        let run = runs.iter().find(|r| r.meta.id == rt.run_id);
        let subtitle = format!(
            "run {} — {} recorder{}",
            run.map_or_else(|| format!("#{}", rt.run_id), |r| r.meta.display_name()),
            rt.recorder,
            run.map_or(String::new(), |r| format!(" — {}", r.meta.machine.short_name()))
        );
        out.push_str(&format!("<h3>{}</h3>\n", escape(&t.title)));
        out.push_str(&format!(
            "<figure>{}<figcaption>{}</figcaption></figure>\n",
            lanes::to_svg(t, &subtitle),
            escape(&subtitle)
        ));
        let stats = schedlab_trace::stats::timeline_stats(t);
        out.push_str("<div class=\"scroll\">");
        out.push_str(&views::timeline_stats_table(&stats).to_html("per thread", None));
        out.push_str("</div>\n");
        let json = serde_json::to_string(&schedlab_trace::perfetto::to_json(t))
            .expect("a trace always serialises");
        let file = format!("schedlab-run{}-timeline{}-{}.json", rt.run_id, i, rt.recorder);
        out.push_str(&format!(
            "<p><a download=\"{}\" href=\"data:application/json;base64,{}\">Download the \
             Perfetto trace</a> ({} KiB; open it in ui.perfetto.dev).</p>\n",
            escape(&file),
            base64::engine::general_purpose::STANDARD.encode(json.as_bytes()),
            json.len().div_ceil(1024)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::machine::Machine;
    use schedlab_measure::model::{Params, RunMeta, Sample, Unit, Warning};

    fn run(id: i64, label: &str) -> Run {
        let mut meta = RunMeta::starting("quick", Machine::fingerprint(), ("0.1.0", "abc"));
        meta.id = id;
        meta.label = Some(label.into());
        let sample = |v: f64| Sample {
            iters: 1,
            elapsed_ns: 1,
            value: v,
            other_cpu_ns: None,
            migrated: false,
        };
        let ok = Measurement::of_samples(
            "os.syscall.null",
            Params::new().with("kind", "<b>bold</b>"),
            Unit::Nanos,
            (0..11).map(|i| sample(100.0 + i as f64)).collect(),
            0.1,
        );
        let skipped = Measurement::without_samples(
            "threads.switch",
            Params::new(),
            Unit::Nanos,
            Outcome::Skipped("needs \"root\" & <more>".into()),
            0.0,
        );
        let warnings = vec![Warning {
            kind: "vm".into(),
            probe: None,
            severity: schedlab_measure::model::Severity::Warn,
            message: "a VM <here>".into(),
            advice: "compare like with like".into(),
        }];
        Run { meta, results: vec![ok, skipped], warnings }
    }

    #[test]
    fn echo_rows_on_plain_std_io_share_one_group_of_the_thread_systems_chart() {
        let mut r = run(1, "a");
        let sample = |v: f64| Sample {
            iters: 1,
            elapsed_ns: 1,
            value: v,
            other_cpu_ns: None,
            migrated: false,
        };
        let row = |backend: &str, io: Option<&str>| {
            let p = Params::new().with("connections", 16).with("backend", backend);
            let p = io.map_or(p.clone(), |io| p.with("io", io));
            Measurement::of_samples(
                "threads.net.echo",
                p,
                Unit::Nanos,
                (0..3).map(|k| sample(1000.0 + k as f64)).collect(),
                0.1,
            )
        };
        r.results = vec![row("os", None), row("rt", Some("std")), row("tokio", None)];
        let html = thread_systems_html(&r).expect("a chart");
        assert_eq!(html.matches("threads.net.echo connections=16").count(), 1, "{html}");
        assert!(!html.contains("io=std"), "{html}");
        r.results.push(row("rt", Some("net")));
        let html = thread_systems_html(&r).expect("a chart");
        assert!(html.contains("threads.net.echo connections=16,io=net"), "{html}");
    }

    #[test]
    fn everything_from_the_machine_or_the_user_is_escaped() {
        let evil = "<script>alert(1)</script>";
        let html = page(&[run(1, evil), run(2, "b")], 0, &[], "0.1.0");
        assert!(!html.contains(evil), "a label reached the page unescaped");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!html.contains("<b>bold</b>") && html.contains("&lt;b&gt;bold&lt;/b&gt;"));
        assert!(html.contains("needs &quot;root&quot; &amp; &lt;more&gt;"));
        assert!(html.contains("a VM &lt;here&gt;"));
        assert!(!html.contains("<li></li>"));
        // The only scripts are the page's own.
        assert_eq!(html.matches("<script>").count(), 1);
    }

    #[test]
    fn a_page_is_self_contained_with_tables_plots_and_comparison() {
        let html = page(&[run(1, "a"), run(2, "b")], 0, &[], "0.1.0");
        assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
        assert!(!html.contains("{{"), "a placeholder left in the page");
        for absent in ["http://", "https://", "<link", "src="] {
            let hits: Vec<_> = html
                .match_indices(absent)
                .map(|(i, _)| &html[i..(i + 60).min(html.len())])
                .collect();
            // SVG's namespace URI is an identifier, not a fetch.
            assert!(
                hits.iter().all(|h| h.starts_with("http://www.w3.org/2000/svg")),
                "{absent}: {hits:?}"
            );
        }
        assert!(html.contains("id=\"comparison\""));
        let codes: Vec<&str> =
            html.split("<i data-s=\"").skip(1).map(|d| &d[..d.find('"').unwrap()]).collect();
        assert_eq!(codes.len(), 2, "one plot per measured result per run");
        assert!(codes.iter().all(|c| c.len() == 3 + 11), "one mark per raw sample: {codes:?}");
    }

    #[test]
    fn a_run_page_opens_with_its_summary_and_each_family_has_chart_then_table() {
        let mut r = run(1, "a");
        r.warnings.push(Warning {
            kind: "high-variation".into(),
            probe: Some("os.syscall.null".into()),
            severity: schedlab_measure::model::Severity::Warn,
            message: "CV 9%".into(),
            advice: "more samples".into(),
        });
        let html = page(&[r.clone()], 0, &[], "0.1.0");
        let main = html.split("<main>").nth(1).unwrap();
        assert!(main.trim_start().starts_with("<section id=\"summary\""), "{}", &main[..200]);
        let summary = main.split("</section>").next().unwrap();
        let median = r.results[0].summary.as_ref().unwrap().median;
        assert!(!summary.contains("<tr data-probe"), "no headline here: {summary}");
        // The null syscall row here has a parameter the headline does not: no figure, but
        // the noise line links to the warnings.
        assert!(summary.contains("1 of 1 results vary by more than 5%"), "{summary}");
        assert!(summary.contains("href=\"#warnings\""));
        // A run whose null syscall has the headline's parameters gets its figure, with the
        // stored median as data.
        r.results[0].params = Params::new();
        let html = page(&[r], 0, &[], "0.1.0");
        assert!(html.contains(&format!(
            "<tr data-probe=\"os.syscall.null\" data-params=\"\" data-median=\"{median}\">"
        )));
        assert!(html.contains("seed 002: 71.00 ns"), "the seed machines beside it");
        // The os family's section: its table (one time row: no chart) after its heading.
        let os = html.split("<section id=\"results-0-os\"").nth(1).unwrap();
        assert!(os.contains("<table class=\"results sortable n3 n4 p5 n6 n7\">"), "{os}");
    }

    #[test]
    fn a_comparison_page_opens_with_what_changed_beyond_noise() {
        let sample = |v: f64| Sample {
            iters: 1,
            elapsed_ns: 1,
            value: v,
            other_cpu_ns: None,
            migrated: false,
        };
        let result = |probe: &str, base: f64| {
            Measurement::of_samples(
                probe,
                Params::new(),
                Unit::Nanos,
                (0..11).map(|i| sample(base + i as f64)).collect(),
                0.1,
            )
        };
        let (mut a, mut b) = (run(1, "a"), run(2, "b"));
        a.results = vec![result("os.same", 100.0), result("os.slower", 100.0)];
        b.results = vec![result("os.same", 101.0), result("os.slower", 300.0)];
        let html = page(&[a, b], 0, &[], "0.1.0");
        let main = html.split("<main>").nth(1).unwrap();
        assert!(main.trim_start().starts_with("<section id=\"changes\""));
        let changes = main.split("</section>").next().unwrap();
        assert!(changes.contains("1 row changed beyond noise"), "{changes}");
        assert!(changes.contains("os.slower") && !changes.contains("os.same"), "{changes}");
        // Across machines there is no noise to judge by: no verdicts first.
        let (mut c, mut d) = (run(3, "c"), run(4, "d"));
        d.meta.machine.host = "elsewhere".into();
        c.results = vec![result("os.slower", 100.0)];
        d.results = vec![result("os.slower", 300.0)];
        let other = page(&[c, d], 0, &[], "0.1.0");
        let changes = other.split("<section id=\"changes\"").nth(1).unwrap();
        let changes = changes.split("</section>").next().unwrap();
        assert!(changes.contains("No other run was made on the machine of c"), "{changes}");
        // The full comparison still has both.
        let comparison = html.split("<section id=\"comparison\"").nth(1).unwrap();
        assert!(comparison.contains("os.same") && comparison.contains("os.slower"));
    }

    #[test]
    fn print_turns_every_palette_colour_into_a_grey_of_its_own() {
        let print = STYLE.split("@media print").nth(1).expect("a print block");
        let mut greys = Vec::new();
        for i in 0..16 {
            let c = crate::svg::color(i);
            let rule = format!("[fill=\"{c}\"] {{ fill: ");
            let grey = print.split(&rule).nth(1).unwrap_or_else(|| panic!("{c} has no grey"));
            let grey = grey.split(';').next().unwrap();
            assert!(print.contains(&format!("[stroke=\"{c}\"] {{ stroke: {grey}; }}")), "{c}");
            assert!(!greys.contains(&grey), "{c} shares its grey {grey}");
            greys.push(grey);
        }
        assert!(!print.contains("filter:"), "a CSS filter prints the page as one image");
    }

    #[test]
    fn the_script_decodes_plots_with_the_alphabet_and_size_they_were_coded_in() {
        let html = page(&[run(1, "a")], 0, &[], "0.1.0");
        let quoted = format!("var ALPHABET = \"{}\";", svg::STRIP_CODE_ALPHABET);
        assert!(html.contains(&quoted), "the page's script says {quoted}");
        assert!(html.contains("var SIZE = \"160 18 4\""), "and the strips' size");
        assert!(html.contains("width: 160px; height: 18px; contain: strict;"), "their boxes");
        assert!(!html.contains("{{"), "every placeholder of the script and styles is filled");
    }

    #[test]
    fn every_results_table_carries_codes_not_drawn_plots_and_shared_notes_once() {
        let mut r = run(1, "a");
        let sample = |v: f64| Sample {
            iters: 1,
            elapsed_ns: 1,
            value: v,
            other_cpu_ns: None,
            migrated: false,
        };
        r.results = (0..views::SHARED_NOTES_FROM)
            .map(|i| {
                let mut m = Measurement::of_samples(
                    "os.pipe",
                    Params::new().with("size", i),
                    Unit::Nanos,
                    (0..11).map(|k| sample(100.0 + k as f64)).collect(),
                    0.1,
                );
                m.notes = Params::new().with("cpu", 0).with("thp", "madvise");
                m
            })
            .collect();
        let html = page(&[r], 0, &[], "0.1.0");
        let os = html.split("<section id=\"results-0-os\"").nth(1).unwrap();
        assert!(!os.contains("<details"), "a short family is open");
        assert!(!os.contains("<svg class=\"strip\"") && !os.contains("<circle"), "{os}");
        assert_eq!(os.matches("<i data-s=\"").count(), views::SHARED_NOTES_FROM, "a code a row");
        // Once for the reader, once as data for the row filter (sort.js), none on the rows.
        assert_eq!(os.matches("cpu=0 thp=madvise").count(), 2, "the shared notes once: {os}");
        assert!(os.contains("data-probe=\"os.pipe\" data-notes=\"cpu=0 thp=madvise\""));
        assert!(os.contains("Notes of every measured os.pipe row below: cpu=0 thp=madvise"));
        // Without the script the page says what it is missing.
        assert!(html.contains("<noscript>") && html.contains("raw-sample plot"));
    }

    #[test]
    fn a_folded_family_keeps_every_row_s_samples_for_its_plot() {
        let mut r = run(1, "a");
        let sample = |v: f64| Sample {
            iters: 1,
            elapsed_ns: 1,
            value: v,
            other_cpu_ns: None,
            migrated: false,
        };
        r.results = (0..FOLD_ABOVE + 1)
            .map(|i| {
                Measurement::of_samples(
                    "mem.clear",
                    Params::new().with("size", i),
                    Unit::Nanos,
                    (0..11).map(|k| sample(100.0 + (i * 11 + k) as f64)).collect(),
                    0.1,
                )
            })
            .collect();
        let html = page(&[r.clone()], 0, &[], "0.1.0");
        assert!(html.contains("<details class=\"lazy\">"), "the family is folded");
        let data: Vec<&str> =
            html.split("data-s=\"").skip(1).map(|d| &d[..d.find('"').unwrap()]).collect();
        assert_eq!(data.len(), FOLD_ABOVE + 1, "one plot's code per row");
        for (m, d) in r.results.iter().zip(&data) {
            let s = m.summary.as_ref().unwrap();
            let values: Vec<f64> = m.samples.iter().map(|x| x.value).collect();
            assert_eq!(*d, svg::strip_code(&values, s.median, (s.ci_low, s.ci_high)));
            assert_eq!(d.len(), 3 + 11, "{d}");
        }
    }

    #[test]
    fn the_page_grows_with_the_data_not_faster() {
        // A run of n results of 11 samples each: the page is a fixed part plus at most
        // half a KiB per result, folded or not: each row's plot is a code the script draws
        // (a drawn plot of 11 samples alone was 600 bytes).
        let size = |n: usize, probe: &str| {
            let mut r = run(1, "a");
            let sample = |v: f64| Sample {
                iters: 1,
                elapsed_ns: 1,
                value: v,
                other_cpu_ns: None,
                migrated: false,
            };
            r.results = (0..n)
                .map(|i| {
                    Measurement::of_samples(
                        probe,
                        Params::new().with("size", i),
                        Unit::Nanos,
                        (0..11).map(|k| sample(100.0 + k as f64)).collect(),
                        0.1,
                    )
                })
                .collect();
            page(&[r], 0, &[], "0.1.0").len()
        };
        let (empty, hundred) = (size(0, "os.x"), size(100, "os.x"));
        assert!(empty < 32 * 1024, "the page around the data is {empty} bytes");
        assert!(
            hundred - empty < 100 * 512,
            "{} bytes per plotted result",
            (hundred - empty) / 100
        );
        let folded = size(FOLD_ABOVE * 5, "os.x") - empty;
        assert!(
            folded < FOLD_ABOVE * 5 * 512,
            "{} bytes per folded row",
            folded / (FOLD_ABOVE * 5)
        );
    }

    #[test]
    fn timelines_carry_lanes_stats_and_a_perfetto_download() {
        use schedlab_trace::model::{Lane, Span};
        let mut lane = Lane::new("a&b", "busy");
        lane.runs = vec![Span { start_ns: 0, end_ns: 5_000_000 }];
        lane.done_ns = 10_000_000;
        let t = Timeline {
            scenario: "3".into(),
            title: "3. two <equal>".into(),
            recorder: "sampling".into(),
            window_ns: 10_000_000,
            threshold_ns: 1,
            interval_ns: 1,
            lanes: vec![lane],
            marks: vec![],
        };
        let html = page(
            &[run(7, "t")],
            0,
            &[RunTimeline { run_id: 7, recorder: "sampling".into(), timeline: t }],
            "0.1.0",
        );
        assert!(html.contains("3. two &lt;equal&gt;"));
        assert!(html.contains("data:application/json;base64,"));
        let b64 = html.split("base64,").nth(1).unwrap().split('"').next().unwrap();
        let json = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert!(doc.get("traceEvents").is_some(), "a Chrome trace");
    }
}
