//! Formats other benchmark tools read, one small type each behind [`crate::export::Format`]:
//! the Bencher Metric Format ([`Bencher`]) and conbench's benchmark results ([`Conbench`]).
//!
//! **Bencher Metric Format** (BMF, <https://bencher.dev/docs/reference/bencher-metric-format>,
//! its JSON Schema at <https://bencher.dev/bmf.json>): an object of benchmarks, each an object
//! of measures, each `{"value", "lower_value", "upper_value"}`. A result's benchmark is its
//! probe and parameters (`os.pipe.latency[placement=same]`); its value the median and the
//! bounds its 95% interval. Times go to Bencher's built-in `latency` measure, in its unit,
//! nanoseconds (µs are converted); operations per second to the built-in `throughput`
//! (ops/s); MiB/s to a measure `bandwidth` that Bencher creates on first use (its unit MiB/s,
//! 2²⁰ bytes per second). Results that were not measured (skipped, failed) have no value
//! and are left out.
//!
//! **conbench** (<https://github.com/conbench/conbench>, the body of `POST
//! /api/benchmark-results/`, `_BenchmarkResultCreateSchema` in
//! `conbench/entities/benchmark_result.py`): a JSON array with one such object per result.
//! `run_id` and `batch_id` are the run's UUID, `timestamp` its start, `tags` the probe as
//! `name` and its parameters, `stats.data` the raw samples in one of the units conbench
//! accepts (`conbench/units.py`: `ns`, `s`, `B/s`, `i/s`; µs become ns, MiB/s become B/s,
//! ops/s become i/s), `machine_info` the fingerprint (the cache sizes and the GPU, which it
//! does not hold, as 0), `context` what must stay equal along a history (the suite),
//! `info` what may change (kernel, schedlab's version, the median's interval). A result
//! that was not measured carries `error` and no `stats`. conbench requires the benchmarked
//! repository (`github.repository`, a `https://github.com/` URL); the caller gives it, as
//! conbench's own adapters read it from `CONBENCH_PROJECT_REPOSITORY`.

use serde_json::{json, Map, Value};

use schedlab_measure::model::{Measurement, Outcome, Run, Unit};

use crate::export::Format;

/// The Bencher Metric Format.
#[derive(Debug, Default, Clone, Copy)]
pub struct Bencher;

/// conbench's benchmark results, for a run whose UUID and repository are given.
#[derive(Debug, Clone, Default)]
pub struct Conbench {
    /// The run's UUID (`run_id`, `batch_id`).
    pub run_uuid: String,
    /// The benchmarked repository (`https://github.com/org/repo`).
    pub repository: String,
    /// The benchmarked commit, if known.
    pub commit: Option<String>,
    /// The pull request it was measured for, if any.
    pub pr_number: Option<u64>,
}

/// A result's benchmark name: `probe` or `probe[k=v,k=v]`.
pub fn benchmark_name(m: &Measurement) -> String {
    if m.params.is_empty() {
        m.probe.clone()
    } else {
        format!("{}[{}]", m.probe, m.params.key())
    }
}

/// Bencher's measure for `unit` and the factor that converts a value into it.
fn bencher_measure(unit: Unit) -> (&'static str, f64) {
    match unit {
        Unit::Nanos => ("latency", 1.0),
        Unit::Micros => ("latency", 1e3),
        Unit::OpsPerSec => ("throughput", 1.0),
        Unit::MibPerSec => ("bandwidth", 1.0),
    }
}

/// conbench's unit for `unit` and the factor that converts a value into it.
fn conbench_unit(unit: Unit) -> (&'static str, f64) {
    match unit {
        Unit::Nanos => ("ns", 1.0),
        Unit::Micros => ("ns", 1e3),
        Unit::OpsPerSec => ("i/s", 1.0),
        Unit::MibPerSec => ("B/s", 1_048_576.0),
    }
}

/// A finite number as JSON (NaN and infinities have no JSON spelling: null).
fn num(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

fn finish(v: &Value) -> String {
    let s = serde_json::to_string_pretty(v).expect("a JSON value always serialises");
    let mut s = crate::export::json_escape_unsafe(&s);
    s.push('\n');
    s
}

impl Format for Bencher {
    fn render(&self, run: &Run) -> String {
        let mut doc = Map::new();
        for m in &run.results {
            let (Outcome::Ok, Some(s)) = (&m.outcome, &m.summary) else { continue };
            let (measure, k) = bencher_measure(m.unit);
            let metric = json!({
                "value": num(s.median * k),
                "lower_value": num(s.ci_low * k),
                "upper_value": num(s.ci_high * k),
            });
            let entry = doc.entry(benchmark_name(m)).or_insert_with(|| json!({}));
            entry[measure] = metric;
        }
        finish(&Value::Object(doc))
    }
}

impl Format for Conbench {
    fn render(&self, run: &Run) -> String {
        let meta = &run.meta;
        let mc = &meta.machine;
        let machine_info = json!({
            "name": mc.host,
            "architecture_name": mc.arch,
            "kernel_name": mc.kernel,
            "os_name": mc.os,
            "os_version": mc.kernel_version,
            "cpu_model_name": mc.cpu_model,
            "cpu_l1d_cache_bytes": 0,
            "cpu_l1i_cache_bytes": 0,
            "cpu_l2_cache_bytes": 0,
            "cpu_l3_cache_bytes": 0,
            "cpu_core_count": mc.physical_cores.unwrap_or(mc.logical_cpus),
            "cpu_thread_count": mc.logical_cpus,
            "cpu_frequency_max_hz": mc.cpu_mhz.map_or(0, |mhz| (mhz * 1e6).round() as u64),
            "memory_bytes": mc.memory_bytes.unwrap_or(0),
            "gpu_count": 0,
            "gpu_product_names": [],
        });
        let mut github = json!({ "repository": self.repository });
        if let Some(c) = &self.commit {
            github["commit"] = json!(c);
        }
        if let Some(pr) = self.pr_number {
            github["pr_number"] = json!(pr);
        }
        let mut run_tags = Map::new();
        run_tags.insert("suite".into(), json!(meta.suite));
        run_tags.insert("host".into(), json!(mc.host));
        if let Some(l) = &meta.label {
            run_tags.insert("name".into(), json!(l));
        }
        let results: Vec<Value> = run
            .results
            .iter()
            .map(|m| {
                let mut tags = Map::new();
                tags.insert("name".into(), json!(m.probe));
                for (k, v) in &m.params.0 {
                    // `name` is conbench's; a parameter of that name keeps its value under another key.
                    let key = if k == "name" { "param_name".to_string() } else { k.clone() };
                    tags.insert(key, json!(v));
                }
                let mut info = Map::new();
                info.insert("kernel".into(), json!(mc.kernel));
                info.insert("schedlab_version".into(), json!(meta.version));
                info.insert("schedlab_git_rev".into(), json!(meta.git_rev));
                let mut r = json!({
                    "run_id": self.run_uuid,
                    "run_tags": run_tags,
                    "batch_id": self.run_uuid,
                    "timestamp": meta.started_at,
                    "machine_info": machine_info,
                    "tags": tags,
                    "context": { "schedlab_suite": meta.suite },
                    "github": github,
                });
                match (&m.outcome, &m.summary) {
                    (Outcome::Ok, Some(s)) => {
                        let (unit, k) = conbench_unit(m.unit);
                        let data: Vec<Value> = if m.samples.is_empty() {
                            vec![num(s.median * k)]
                        } else {
                            m.samples.iter().map(|x| num(x.value * k)).collect()
                        };
                        info.insert("median_ci_low".into(), json!((s.ci_low * k).to_string()));
                        info.insert("median_ci_high".into(), json!((s.ci_high * k).to_string()));
                        r["stats"] = json!({
                            "data": data,
                            "unit": unit,
                            "iterations": m.iters_per_sample,
                        });
                    }
                    (outcome, _) => {
                        r["error"] = json!({
                            "status": outcome.key(),
                            "reason": outcome.reason().unwrap_or(""),
                        });
                    }
                }
                r["info"] = Value::Object(info);
                r
            })
            .collect();
        finish(&Value::Array(results))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_measure::machine::Machine;
    use schedlab_measure::model::{Params, RunMeta, Sample};

    fn run() -> Run {
        let meta = RunMeta::starting("quick", Machine::fingerprint(), ("0.1.0", "abc"));
        let samples = |xs: &[f64]| {
            xs.iter()
                .map(|&value| Sample {
                    iters: 10,
                    elapsed_ns: 1,
                    value,
                    other_cpu_ns: None,
                    migrated: false,
                })
                .collect::<Vec<_>>()
        };
        let us = Measurement::of_samples(
            "os.pipe.latency",
            Params::new().with("placement", "same"),
            Unit::Micros,
            samples(&[2.0, 2.1, 1.9, 2.0, 2.05, 1.95, 2.0]),
            0.1,
        );
        let bw = Measurement::of_samples(
            "mem.copy",
            Params::new(),
            Unit::MibPerSec,
            samples(&[100.0, 101.0, 99.0]),
            0.1,
        );
        let skipped = Measurement::without_samples(
            "os.skip",
            Params::new(),
            Unit::Nanos,
            Outcome::Skipped("needs root".into()),
            0.0,
        );
        Run { meta, results: vec![us, bw, skipped], warnings: vec![] }
    }

    #[test]
    fn bencher_converts_to_its_measures_and_leaves_unmeasured_out() {
        let v: Value = serde_json::from_str(&Bencher.render(&run())).unwrap();
        let lat = &v["os.pipe.latency[placement=same]"]["latency"];
        assert_eq!(lat["value"], json!(2000.0), "µs become ns: {v}");
        assert!(lat["lower_value"].as_f64().unwrap() <= 2000.0);
        assert!(lat["upper_value"].as_f64().unwrap() >= 2000.0);
        assert_eq!(v["mem.copy"]["bandwidth"]["value"], json!(100.0));
        assert!(v.get("os.skip").is_none());
    }

    #[test]
    fn conbench_has_one_object_per_result_with_samples_or_an_error() {
        let c = Conbench {
            run_uuid: "u-1".into(),
            repository: "https://github.com/o/r".into(),
            commit: Some("abc".into()),
            pr_number: None,
        };
        let v: Value = serde_json::from_str(&c.render(&run())).unwrap();
        let a = v.as_array().unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a[0]["tags"], json!({"name": "os.pipe.latency", "placement": "same"}));
        assert_eq!(a[0]["stats"]["unit"], json!("ns"));
        assert_eq!(a[0]["stats"]["data"][0], json!(2000.0));
        assert_eq!(a[1]["stats"]["unit"], json!("B/s"));
        assert_eq!(a[1]["stats"]["data"][0], json!(104_857_600.0));
        assert_eq!(a[2]["error"]["status"], json!("skipped"));
        assert!(a[2].get("stats").is_none());
        assert_eq!(
            a[0]["github"],
            json!({"repository": "https://github.com/o/r", "commit": "abc"})
        );
    }
}
