//! The first screen of the HTML report (issue 28): a run's summary — the headline figures of
//! [`crate::summary`] with their pictures against the seed machines and the previous run, the
//! thread systems' chart, the seeds' verdicts and the noise line — and, for a page of several
//! runs, the rows that changed beyond noise. The page around them is [`super`]'s.

use schedlab_measure::model::{Outcome, Run};

use super::family;
use crate::svg::{self, escape};
use crate::units::human;
use crate::{summary, views};

/// One run's first screen: the headline figures (each row carries its probe, parameters and
/// stored median as `data-` attributes, which the browser test checks against the
/// database), the thread systems' chart, the seeds' verdicts and the noise line.
pub(super) fn summary_html(s: &summary::Summary, run_index: usize) -> String {
    let run = s.run;
    let m = &run.meta.machine;
    let mut out = format!(
        "<p class=\"lede\">{} — {} ({} CPUs) — kernel {} — suite {}, {}</p>\n",
        escape(&m.host),
        escape(&m.cpu_model),
        m.logical_cpus,
        escape(&m.kernel),
        escape(&run.meta.suite),
        escape(&run.meta.started_at)
    );
    if let Some(n) = &s.noise {
        out.push_str(&format!(
            "<p class=\"noise\"><a href=\"#warnings\">{}</a></p>\n",
            escape(&n.line())
        ));
    }
    if !s.figures.is_empty() {
        let with_previous = s.has_previous();
        let (ring, previous_th) = match with_previous {
            true => {
                ("; <b>○</b> the previous run of this host", "<th scope=\"col\">previous run</th>")
            }
            false => ("", ""),
        };
        out.push_str(&format!(
            "<p class=\"key\">In each picture: <b>▮</b> this run's median, its 95% interval \
             the grey band; <b>|</b> the seed papers' machines{ring} (log scale).</p>\n\
             <div class=\"scroll\"><table class=\"summary\">\n<thead><tr><th scope=\"col\">\
             figure</th><th scope=\"col\" class=\"num\">median</th><th scope=\"col\" \
             class=\"num\">95% CI</th><th scope=\"col\">this run against others</th>\
             <th scope=\"col\">seed machines</th>{previous_th}</tr></thead>\n<tbody>\n"
        ));
        for f in &s.figures {
            let sm = f.summary();
            let unit = f.result.unit;
            let mut marks: Vec<svg::Mark> = f
                .published
                .iter()
                .map(|p| svg::Mark {
                    value: p.value,
                    title: format!("{} {}", p.machine, human(p.value, unit)),
                    shape: svg::MarkShape::Tick,
                })
                .collect();
            if let Some((id, old, _)) = &f.previous {
                if let Some(os) = &old.summary {
                    marks.push(svg::Mark {
                        value: os.median,
                        title: format!("previous run #{id} {}", human(os.median, unit)),
                        shape: svg::MarkShape::Ring,
                    });
                }
            }
            let picture = svg::against(
                sm.median,
                (sm.ci_low, sm.ci_high),
                &marks,
                &format!("{}: {}", f.headline.name, human(sm.median, unit)),
            );
            out.push_str(&format!(
                "<tr data-probe=\"{}\" data-params=\"{}\" data-median=\"{}\"><th scope=\"row\">\
                 <a href=\"#results-{run_index}-{}\">{}</a></th><td class=\"num\">{}</td>\
                 <td class=\"num\">{} – {}</td><td class=\"plot\">{picture}</td><td data-label=\"seed machines\">{}</td>{}</tr>\n",
                escape(f.headline.probe),
                escape(f.headline.params),
                sm.median,
                escape(family(f.headline.probe)),
                escape(f.headline.name),
                escape(&human(sm.median, unit)),
                escape(&human(sm.ci_low, unit)),
                escape(&human(sm.ci_high, unit)),
                escape(&f.published_text()),
                match with_previous {
                    true => format!(
                        "<td data-label=\"previous run\">{}</td>",
                        escape(&f.previous_text())
                    ),
                    false => String::new(),
                }
            ));
        }
        out.push_str("</tbody></table></div>\n");
    }
    if let Some(chart) = thread_chart(run) {
        out.push_str(&format!(
            "<figure>{chart}<figcaption>The thread systems on this machine: kernel threads \
             (os), schedlab-rt user threads (rt) and tokio tasks, median per operation \
             (<a href=\"#results-{run_index}-threads\">every thread probe</a>)</figcaption></figure>\n"
        ));
    }
    for v in &s.verdicts {
        out.push_str(&format!("<p class=\"verdict\">{}</p>\n", escape(v)));
    }
    out
}

/// The first screen's grouped chart: [`summary::THREAD_GROUPS`] × [`summary::THREAD_BACKENDS`].
fn thread_chart(run: &Run) -> Option<String> {
    let groups: Vec<svg::BarGroup> = summary::THREAD_GROUPS
        .iter()
        .filter_map(|(probe, rest)| {
            let bars: Vec<Option<(f64, String)>> = summary::THREAD_BACKENDS
                .iter()
                .map(|b| {
                    let key = if rest.is_empty() {
                        format!("backend={b}")
                    } else {
                        format!("{rest},backend={b}")
                    };
                    let m =
                        run.results.iter().find(|m| m.probe == *probe && m.params.key() == key)?;
                    match (&m.outcome, &m.summary, m.unit) {
                        (Outcome::Ok, Some(s), schedlab_measure::model::Unit::Nanos) => {
                            Some((s.median, crate::units::human(s.median, m.unit)))
                        }
                        _ => None,
                    }
                })
                .collect();
            bars.iter().any(Option::is_some).then(|| svg::BarGroup {
                label: if rest.is_empty() { probe.to_string() } else { format!("{probe} {rest}") },
                bars,
            })
        })
        .collect();
    (!groups.is_empty()).then(|| {
        svg::bars(
            "Thread systems: median per operation",
            &summary::THREAD_BACKENDS,
            &groups,
            "ns per operation (log scale)",
        )
    })
}

/// For several runs, what changed beyond noise against the baseline, alone: the rows of
/// the comparison whose verdict is better or worse for some run of the baseline's machine.
pub(super) fn changes_html(runs: &[Run], baseline: usize) -> String {
    let same = |i: usize| i != baseline && views::same_machine(&runs[i], &runs[baseline]);
    if !(0..runs.len()).any(same) {
        // Noise is one machine's: across machines there are ratios, not verdicts.
        return format!(
            "<p>No other run was made on the machine of {} (the baseline), so nothing is \
             judged against its noise; the <a href=\"#comparison\">comparison</a> has the \
             ratios.</p>\n",
            escape(&runs[baseline].meta.display_name())
        );
    }
    let t = views::changed_table(runs, baseline);
    if t.is_empty() {
        return format!(
            "<p>Nothing changed beyond noise against {} (the baseline); every row is in the \
             <a href=\"#comparison\">comparison</a>.</p>\n",
            escape(&runs[baseline].meta.display_name())
        );
    }
    format!(
        "<p>{} row{} changed beyond noise against {} (the baseline): their 95% intervals do \
         not overlap. Every row is in the <a href=\"#comparison\">comparison</a>.</p>\n\
         <div class=\"scroll\">{}</div>\n",
        t.len(),
        if t.len() == 1 { "" } else { "s" },
        escape(&runs[baseline].meta.display_name()),
        t.to_html("changed beyond noise", None)
    )
}
