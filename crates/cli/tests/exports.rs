//! `schedlab export --format bencher|conbench` checked against the formats as their
//! projects publish them: Bencher's JSON Schema for BMF (a copy in
//! crates/report/testdata/bmf.schema.json, with its source) and conbench's result schema
//! (written down from its marshmallow schemas in crates/report/testdata/
//! conbench-result.schema.json, with the files and commits it was read from), by a small
//! JSON Schema checker of the keywords those two use.

mod common;

use common::runs::{around, store, Made};
use common::{bin, ok, text};
use schedlab_measure::model::Unit;
use schedlab_store::Location;
use serde_json::Value;

fn testdata(name: &str) -> Value {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/testdata").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Checks `v` against `schema` for the keywords the two schemas use (`type`, `enum`,
/// `required`, `properties`, `patternProperties` with `.+`, `additionalProperties: false`,
/// `items`, `minLength`, `pattern` as `^` and a literal prefix); returns every violation
/// with its JSON path.
fn violations(schema: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    let s = schema.as_object().expect("a schema is an object");
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(t) => vec![t.as_str()],
            Value::Array(a) => a.iter().map(|x| x.as_str().unwrap()).collect(),
            _ => panic!("type {t}"),
        };
        let is = |t: &str| match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            other => panic!("type {other}"),
        };
        if !types.iter().any(|t| is(t)) {
            out.push(format!("{path}: {v} is not {types:?}"));
            return;
        }
    }
    if let Some(Value::Array(allowed)) = s.get("enum") {
        if !allowed.contains(v) {
            out.push(format!("{path}: {v} is not one of {allowed:?}"));
        }
    }
    if let (Some(min), Some(text)) = (s.get("minLength"), v.as_str()) {
        if (text.chars().count() as u64) < min.as_u64().unwrap() {
            out.push(format!("{path}: {text:?} is shorter than {min}"));
        }
    }
    if let (Some(Value::String(p)), Some(text)) = (s.get("pattern"), v.as_str()) {
        let prefix = p.strip_prefix('^').expect("only ^prefix patterns");
        assert!(!prefix.contains(['[', '(', '*', '+', '?', '{', '\\']), "pattern {p}");
        if !text.starts_with(prefix) {
            out.push(format!("{path}: {text:?} does not match {p}"));
        }
    }
    if let Some(obj) = v.as_object() {
        for r in s.get("required").and_then(Value::as_array).into_iter().flatten() {
            let r = r.as_str().unwrap();
            if !obj.contains_key(r) {
                out.push(format!("{path}: {r} is required"));
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        let any = s.get("patternProperties").and_then(|p| p.get(".+"));
        assert!(s
            .get("patternProperties")
            .is_none_or(|p| p.as_object().unwrap().len() == 1 && any.is_some()));
        for (k, x) in obj {
            let at = format!("{path}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(sub) => violations(sub, x, &at, out),
                None => match any {
                    Some(sub) if !k.is_empty() => violations(sub, x, &at, out),
                    _ if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        out.push(format!("{path}: {k} is not allowed"))
                    }
                    _ => {}
                },
            }
        }
    }
    if let (Some(items), Some(a)) = (s.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            violations(items, x, &format!("{path}[{i}]"), out);
        }
    }
}

fn check(schema: &Value, v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    violations(schema, v, "$", &mut out);
    out
}

/// A run with a time, a bandwidth and a rate result, one of them with parameters.
fn fill(db: &std::path::Path) {
    store(
        &Location::File(db.to_path_buf()),
        &Made {
            host: "exporter",
            label: "exported",
            started_at: "2026-11-20T03:00:00Z".into(),
            kernel: "6.1.0",
            timer_slack: "50000 ns",
            results: vec![
                ("os.pipe.latency", "placement=same", Unit::Micros, around(10.0, 0.02, 11)),
                ("os.pipe.bandwidth", "", Unit::MibPerSec, around(900.0, 0.02, 11)),
                ("threads.create", "", Unit::OpsPerSec, around(50_000.0, 0.02, 11)),
            ],
        },
    );
}

/// The checker itself: the published BMF example passes, broken documents do not.
#[test]
fn the_schema_checker_tells_good_from_bad() {
    let bmf = testdata("bmf.schema.json");
    assert_eq!(check(&bmf, &testdata("bmf-example.json")), Vec::<String>::new());
    let bad: Value =
        serde_json::json!({"b": {"latency": {"lower_value": 1.0}}, "c": {"m": {"value": "1"}}});
    let v = check(&bmf, &bad);
    assert_eq!(v.len(), 2, "{v:?}");
    let conbench = testdata("conbench-result.schema.json");
    let v = check(
        &conbench,
        &serde_json::json!([{"run_id": "x", "github": {"repository": "https://gitlab.com/x"}}]),
    );
    assert!(v.iter().any(|e| e.contains("batch_id is required")), "{v:?}");
    assert!(v.iter().any(|e| e.contains("does not match ^https://github.com")), "{v:?}");
}

#[test]
fn bencher_export_is_bmf_with_the_interval_as_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    fill(&db);
    let file = dir.path().join("bmf.json");
    let o = bin()
        .arg("--db")
        .arg(&db)
        .args(["export", "exported", "--format", "bencher", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    ok(&o);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(check(&testdata("bmf.schema.json"), &doc), Vec::<String>::new(), "{doc}");
    let lat = &doc["os.pipe.latency[placement=same]"]["latency"];
    let (v, lo, hi) = (
        lat["value"].as_f64().unwrap(),
        lat["lower_value"].as_f64().unwrap(),
        lat["upper_value"].as_f64().unwrap(),
    );
    assert!((v - 10_000.0).abs() < 1.0, "µs become Bencher's ns: {doc}");
    assert!(lo < v && v < hi, "{doc}");
    assert!(doc["os.pipe.bandwidth"]["bandwidth"]["value"].is_number(), "{doc}");
    assert!(doc["threads.create"]["throughput"]["value"].is_number(), "{doc}");
}

#[test]
fn conbench_export_matches_its_result_schema() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    fill(&db);
    let export = |env: &[(&str, &str)]| {
        let mut c = bin();
        c.arg("--db").arg(&db).args(["export", "exported", "--format", "conbench"]);
        for k in
            ["CONBENCH_PROJECT_REPOSITORY", "CONBENCH_PROJECT_COMMIT", "CONBENCH_PROJECT_PR_NUMBER"]
        {
            c.env_remove(k);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let doc: Value = serde_json::from_str(&ok(&export(&[
        ("CONBENCH_PROJECT_REPOSITORY", "git@github.com:example/kernel.git"),
        ("CONBENCH_PROJECT_COMMIT", "0123abcd"),
        ("CONBENCH_PROJECT_PR_NUMBER", "47"),
    ])))
    .unwrap();
    assert_eq!(
        check(&testdata("conbench-result.schema.json"), &doc),
        Vec::<String>::new(),
        "{doc}"
    );
    let results = doc.as_array().unwrap();
    assert_eq!(results.len(), 3);
    for r in results {
        assert!(r.get("stats").is_some() || r.get("error").is_some(), "{r}");
        let ts = r["timestamp"].as_str().unwrap();
        assert!(schedlab_measure::machine::parse_rfc3339(ts).is_some(), "{ts}");
    }
    assert_eq!(results[0]["github"]["repository"], "https://github.com/example/kernel");
    assert_eq!(results[0]["github"]["pr_number"], 47);
    assert_eq!(results[0]["tags"]["placement"], "same");
    assert_eq!(results[0]["stats"]["unit"], "ns");
    assert_eq!(results[1]["stats"]["unit"], "B/s");
    assert_eq!(results[2]["stats"]["unit"], "i/s");
    assert_eq!(results[0]["stats"]["data"].as_array().unwrap().len(), 11, "every raw sample");

    // Without the repository conbench requires, or with a bad one: a usage error.
    for env in [&[][..], &[("CONBENCH_PROJECT_REPOSITORY", "https://gitlab.com/x/y")][..]] {
        let o = export(env);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("CONBENCH_PROJECT_REPOSITORY"), "{}", text(&o.stderr));
    }
    let o = export(&[("CONBENCH_PROJECT_REPOSITORY", "o/r"), ("CONBENCH_PROJECT_PR_NUMBER", "x")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    // An unknown run: a usage error too.
    let o = bin()
        .arg("--db")
        .arg(&db)
        .args(["export", "nope", "--format", "bencher"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}
