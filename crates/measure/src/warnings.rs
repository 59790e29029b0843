//! Noise warnings that say what to do, as a careful experimenter would write them down.
//!
//! Pure functions from a fingerprint or a measurement to warnings; the binary shows them at
//! the end of a run (grouped by kind) and the store keeps them with the run. Each warning
//! separates what was seen (`message`) from what to do about it (`advice`).

use crate::machine::Machine;
use crate::model::{Measurement, Outcome, Severity, Warning};
use crate::placement::Placement;

/// Coefficient of variation above which a result is called noisy.
pub const HIGH_CV: f64 = 0.05;
/// Share of one CPU that other processes may use during a probe before we warn.
pub const OTHER_CPU_SHARE: f64 = 0.10;

/// Warnings about the machine as the run starts.
pub fn machine_warnings(m: &Machine) -> Vec<Warning> {
    let mut w = Vec::new();
    let mut push = |kind: &str, severity, message: String, advice: &str| {
        w.push(Warning { kind: kind.into(), probe: None, severity, message, advice: advice.into() })
    };
    let load = m.loadavg.map_or(String::new(), |l| format!(" (load average {:.2})", l[0]));
    match m.others_at_start {
        Some(share) if share > 0.10 => push(
            "load",
            Severity::Warn,
            format!(
                "other processes used {:.0}% of a CPU just before the run{load}: they compete for the CPU",
                share * 100.0
            ),
            "close other programs or wait until the machine is idle",
        ),
        Some(_) => {}
        None => {
            if let Some([one, _, _]) = m.loadavg.filter(|l| l[0] > 1.0) {
                push(
                    "load",
                    Severity::Warn,
                    format!("load average was {one:.2} at start: other work competes for the CPU"),
                    "close other programs or wait until the machine is idle",
                );
            }
        }
    }
    if m.hypervisor {
        push(
            "vm",
            Severity::Info,
            "running under a hypervisor: the host can deschedule virtual CPUs (steal time) and waking an idle vCPU is slow".into(),
            "compare only against runs on the same kind of VM",
        );
    }
    match m.governor.as_deref() {
        Some("performance") | None => {}
        Some(g) => push(
            "governor",
            Severity::Warn,
            format!(
                "CPU frequency governor is {g:?}, not \"performance\": frequency changes add noise"
            ),
            "run `cpupower frequency-set -g performance` as root",
        ),
    }
    if let Some(cs) = m.clocksource.as_deref() {
        if !matches!(cs, "tsc" | "kvm-clock" | "arch_sys_counter") {
            push(
                "clocksource",
                Severity::Warn,
                format!("clock source is {cs:?}: reading the clock may need a system call"),
                "treat sub-microsecond results with care, or switch the clocksource to tsc",
            );
        }
    }
    if m.smt == Some(true) {
        push(
            "smt",
            Severity::Info,
            "SMT (hyper-threading) is active: a sibling thread shares the core".into(),
            "pin related work to distinct cores when comparing",
        );
    }
    w
}

/// What to do about each kind of measurement warning.
pub fn advice_for(kind: &str) -> &'static str {
    match kind {
        "high-variation" => "close other programs, or take more samples with --samples 30",
        "other-cpu" => "rerun on a quiet machine",
        "migrated" => "check that nothing restricts CPU affinity (cgroup cpusets, taskset)",
        "steal" => "the host is overcommitted: rerun when it is quieter, or on dedicated vCPUs",
        "rounds" => "the machine changed between rounds more than within them: compare such results only within a round, or rerun when the host is steadier",
        "drift" => "the machine's speed moved during the run (host clock, a neighbour, steal): rerun the flagged probes, or compare them only within this run",
        "bimodal" => "read both modes (the `modes` note); pin the parties or keep the CPUs awake if the placement or an idle CPU's wake-up alternates between samples",
        "disturbed-baseline" => "rerun when the machine is quiet (load average below 1), alone: schedlab run --filter sched.background_budget",
        "placement-split" => "read the two placements apart (the `placement` note marks each sample S or x), or measure the pinned variants (placement=same|cross) where the probe has them",
        _ => "",
    }
}

/// Warnings about one measurement: high variation, CPU taken by others, migrations.
pub fn measurement_warnings(m: &Measurement) -> Vec<Warning> {
    let mut w = Vec::new();
    let (Outcome::Ok, Some(s)) = (&m.outcome, &m.summary) else {
        return w;
    };
    let name =
        if m.params.is_empty() { m.probe.clone() } else { format!("{} [{}]", m.probe, m.params) };
    let mut push = |kind: &str, message: String| {
        w.push(Warning {
            kind: kind.into(),
            probe: Some(name.clone()),
            severity: Severity::Warn,
            message,
            advice: advice_for(kind).into(),
        })
    };
    if s.n > 1 && s.cv > HIGH_CV {
        push("high-variation", format!("{name}: CV {:.1}%, {} outliers", s.cv * 100.0, s.outliers));
    }
    // One window over all samples: /proc/stat counts 10 ms ticks, so a short window is
    // mostly quantisation; only windows of ten ticks or more are judged, and only a share
    // above both 10 % and three ticks.
    if let Some(n) = m.noise {
        let tick = crate::noise::tick_ns();
        let wall = n.window_ns as i64;
        let significant = |ns: i64| {
            wall >= 10 * tick && ns > 3 * tick && ns as f64 > OTHER_CPU_SHARE * wall as f64
        };
        for (kind, ns, who) in [
            ("other-cpu", n.other_cpu_ns, "others used"),
            ("steal", n.steal_ns, "the hypervisor stole"),
        ] {
            if significant(ns) {
                push(
                    kind,
                    format!(
                        "{name}: {who} {:.0} ms of CPU in its {:.0} ms of sampling",
                        ns as f64 / 1e6,
                        wall as f64 / 1e6
                    ),
                );
            }
        }
    }
    let values: Vec<f64> = m.samples.iter().map(|x| x.value).collect();
    let h = |v: f64| crate::units::human(v, m.unit);
    let placement = m.notes.get("placement").and_then(Placement::parse);
    let modes = crate::stats::modes(&values);
    if let Some(md) = modes {
        let why = match placement.as_ref().and_then(|p| p.explains(&values, &md)) {
            Some(true) => "; the low one is the samples whose parties shared a CPU, the high one those on two CPUs",
            Some(false) => "; the low one is the samples whose parties were on two CPUs, the high one those that shared a CPU",
            None => "",
        };
        push(
            "bimodal",
            format!(
                "{name}: two modes, {} ({} samples) and {} ({}); the median {} describes neither{why}",
                h(md.low.0),
                md.low.1,
                h(md.high.0),
                md.high.1,
                h(s.median)
            ),
        );
    }
    if let Some(split) = placement.as_ref().and_then(|p| p.split(&values)) {
        let (same, cross) = (split.same.1, split.cross.1);
        let total = same + cross;
        push(
            "placement-split",
            format!(
                "{name}: its two parties shared a CPU in {same} of {total} samples ({:.0}%, median {}) and ran on different CPUs in {cross} ({:.0}%, median {})",
                same as f64 * 100.0 / total as f64,
                h(split.same.0),
                cross as f64 * 100.0 / total as f64,
                h(split.cross.0),
            ),
        );
    }
    let migrated = m.samples.iter().filter(|x| x.migrated).count();
    if migrated > 0 {
        push(
            "migrated",
            format!("{name}: {migrated} of {} samples changed CPU while running", m.samples.len()),
        );
    }
    w
}

/// The drift sentinel moved by `drift` (relative, signed) while `m` was measured.
pub fn drift_warning(m: &Measurement, drift: f64) -> Warning {
    let name =
        if m.params.is_empty() { m.probe.clone() } else { format!("{} [{}]", m.probe, m.params) };
    Warning {
        kind: "drift".into(),
        probe: Some(name.clone()),
        severity: Severity::Warn,
        message: format!(
            "{name}: the reference workload ran {:.0}% {} than at the start of the run around it",
            drift.abs() * 100.0,
            if drift > 0.0 { "slower" } else { "faster" }
        ),
        advice: advice_for("drift").into(),
    }
}

/// The heading under which warnings of `kind` are grouped when shown.
pub fn kind_heading(kind: &str) -> &'static str {
    match kind {
        "high-variation" => "high variation (CV above 5%)",
        "other-cpu" => "CPU taken by other processes (over 10% of one CPU)",
        "migrated" => "samples that changed CPU mid-measurement",
        "steal" => "CPU stolen by the hypervisor (over 10% of the sampling time)",
        "bimodal" => "two modes in the samples (a median between them describes neither)",
        "placement-split" => {
            "two-party results whose samples were split between same-CPU and cross-CPU placement"
        }
        "drift" => "measured while the drift sentinel had moved by more than 10%",
        "rounds" => "rounds whose medians spread more than 5% (and more than the pooled interval)",
        "disturbed-baseline" => {
            "DISTURBED BASELINES: unloaded runs whose own frame p99 exceeded the frame period"
        }
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Params, Sample, Unit};

    fn measurement(values: &[f64], other: i64, migrated: bool) -> Measurement {
        let samples: Vec<Sample> = values
            .iter()
            .map(|&v| Sample {
                iters: 1,
                elapsed_ns: 100_000_000,
                value: v,
                other_cpu_ns: Some(other),
                migrated,
            })
            .collect();
        let noise = crate::noise::Noise {
            window_ns: 100_000_000 * values.len() as u64,
            other_cpu_ns: other * values.len() as i64,
            steal_ns: 0,
        };
        let mut m = Measurement::of_samples("os.x", Params::new(), Unit::Nanos, samples, 0.0);
        m.noise = Some(noise);
        m
    }

    #[test]
    fn quiet_measurement_has_no_warnings() {
        assert!(measurement_warnings(&measurement(&[10.0, 10.1, 9.9, 10.0], 0, false)).is_empty());
    }

    #[test]
    fn a_tick_or_two_of_others_is_quantisation_not_noise() {
        // 20 ms of others in 400 ms: 5 %, and two ticks: no warning.
        assert!(measurement_warnings(&measurement(&[10.0, 10.1, 9.9, 10.0], 5_000_000, false))
            .is_empty());
    }

    #[test]
    fn noisy_measurement_names_its_causes_and_remedies() {
        let w = measurement_warnings(&measurement(&[10.0, 20.0, 5.0, 10.0], 50_000_000, true));
        let kinds: Vec<&str> = w.iter().map(|x| x.kind.as_str()).collect();
        assert_eq!(kinds, ["high-variation", "other-cpu", "migrated"]);
        assert!(w[0].advice.contains("--samples"));
    }

    #[test]
    fn two_modes_are_named_with_both_values() {
        let v = [45.0, 46.0, 44.5, 45.5, 46.2, 90.0, 91.0, 89.5, 90.5, 92.0, 45.8];
        let w = measurement_warnings(&measurement(&v, 0, false));
        let b = w.iter().find(|x| x.kind == "bimodal").expect("a bimodal warning");
        assert!(b.message.contains("45.6") && b.message.contains("90.5"), "{}", b.message);
        assert!(b.message.contains("(6 samples)"), "{}", b.message);
        assert!(!b.advice.is_empty());
    }

    #[test]
    fn a_placement_split_is_named_with_both_shares_and_tied_to_the_modes() {
        let v = [4.0, 45.0, 4.2, 47.0, 4.1, 44.0, 4.3];
        let mut m = measurement(&v, 0, false);
        m.notes.set(
            "placement",
            "parent:cpu0×4,cpu1×3 mig 3; child:cpu0×5,cpu1×2 mig 2; same_cpu 4/7 SxSxSxS",
        );
        let w = measurement_warnings(&m);
        let split = w.iter().find(|x| x.kind == "placement-split").expect("a split warning");
        assert!(split.message.contains("4 of 7 samples (57%"), "{}", split.message);
        assert!(split.message.contains("in 3 (43%"), "{}", split.message);
        assert!(!split.advice.is_empty() && kind_heading("placement-split") != "other");
        let b = w.iter().find(|x| x.kind == "bimodal").expect("a bimodal warning");
        assert!(b.message.contains("the low one is the samples whose parties shared a CPU"));
        // One placement throughout: nothing to say.
        m.notes.set("placement", "parent:cpu0×7 mig 0; child:cpu0×7 mig 0; same_cpu 7/7 SSSSSSS");
        assert!(measurement_warnings(&m).iter().all(|x| x.kind != "placement-split"));
    }

    #[test]
    fn drift_is_named_with_its_direction() {
        let m = measurement(&[10.0, 10.1, 9.9, 10.0], 0, false);
        let w = drift_warning(&m, 0.15);
        assert_eq!(w.kind, "drift");
        assert!(w.message.contains("15% slower"), "{}", w.message);
        assert!(drift_warning(&m, -0.2).message.contains("20% faster"));
        assert!(!w.advice.is_empty() && kind_heading("drift") != "other");
    }

    #[test]
    fn machine_warnings_flag_load_vm_and_governor() {
        let mut m = Machine::fingerprint();
        m.others_at_start = Some(0.5);
        m.hypervisor = true;
        m.governor = Some("powersave".into());
        let kinds: Vec<String> = machine_warnings(&m).into_iter().map(|w| w.kind).collect();
        for k in ["load", "vm", "governor"] {
            assert!(kinds.iter().any(|x| x == k), "{k} missing from {kinds:?}");
        }
    }
}
