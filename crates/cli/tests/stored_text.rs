//! Text from elsewhere, through the real binary: a crafted database whose labels, hosts,
//! parameters, notes, warnings and reasons carry escape sequences (CSI, OSC 8 hyperlinks),
//! BEL, carriage returns, line breaks and right-to-left overrides. Every command that shows
//! them (`runs`, `show`, `compare` and its gate's files, `history`, `export`) prints no raw control character and no forged
//! row; JSON keeps them exactly; and `import`, `push` and `pull` refuse such runs, naming
//! the field. (A `--label` with such characters is refused by `run`, `mem` and `timeline`:
//! `cli.rs`.)

mod common;

use std::path::Path;

use common::{ok, run, text};
use schedlab_measure::machine::Machine;
use schedlab_measure::model::{
    Measurement, Outcome, Params, RunMeta, RunStatus, Sample, Severity, Unit, Warning,
};
use schedlab_store::Store;

/// Every trick at once: colour and clear-screen (CSI), a hidden hyperlink (OSC 8, ended by
/// BEL and by ST), a bell, a carriage return that overwrites the line, a line break that
/// starts a forged row, a one-byte C1 CSI, and a right-to-left override.
fn hostile(what: &str) -> String {
    format!(
        "{what}\x1b[31m\x1b[2J\x1b]8;;http://evil.example/\x07link\x1b]8;;\x1b\\\x07\rOVER\nFORGED {what} | 1 | 2\u{9b}31m\u{202e}txt.exe"
    )
}

/// A character that must not reach a terminal raw: every control character but the line
/// feeds that end our own lines, and the bidirectional and zero-width format characters.
fn raw_control(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Asserts that `out` (what `what` printed) holds no raw control character and no line a
/// hostile text started.
fn assert_safe(what: &str, out: &str) {
    if let Some((i, c)) = out.char_indices().find(|(_, c)| raw_control(*c)) {
        panic!("{what}: raw U+{:04X} at byte {i}:\n{out}", c as u32);
    }
    for line in out.lines() {
        let start = line.trim_start_matches(['|', ' ', '-', '"', ',', '\'']);
        assert!(!start.starts_with("FORGED"), "{what}: a forged row: {line:?}\n{out}");
        assert!(!start.starts_with("OVER"), "{what}: a line overwritten: {line:?}\n{out}");
    }
}

fn sample(k: u64) -> Sample {
    Sample {
        iters: 1000,
        elapsed_ns: 1_000_000 + k,
        value: 1.0 + k as f64 * 1e-3,
        other_cpu_ns: None,
        migrated: false,
    }
}

/// What to poison in a crafted run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Field {
    Label,
    Host,
    Params,
    Notes,
    Warning,
    Reason,
    RunReason,
    Nothing,
}

/// Stores a finished run in `db` with `field` made hostile (through the store, then by hand
/// with SQLite where the store would escape it), as a crafted file would hold it; returns
/// its id.
fn crafted_run(db: &Path, suite: &str, field: Field) -> i64 {
    let h = |w: &str, f: Field| if field == f { hostile(w) } else { w.to_string() };
    let mut store = Store::open(db).unwrap();
    let mut machine = Machine::fingerprint();
    machine.host = h("host", Field::Host);
    let mut meta = RunMeta::starting(suite, machine, ("0.1.0", "test"));
    meta.label = Some(h("label", Field::Label));
    let id = store.begin_run(&meta).unwrap();
    let ok = Measurement {
        notes: Params::new().with("note", h("note", Field::Notes)),
        ..Measurement::of_samples(
            "os.syscall.null",
            Params::new().with("p", h("param", Field::Params)),
            Unit::Nanos,
            (0..5).map(sample).collect(),
            0.1,
        )
    };
    store.save_result(id, &ok).unwrap();
    let failed = Measurement::without_samples(
        "os.pipe.latency",
        Params::new(),
        Unit::Micros,
        Outcome::Failed("a plain reason".into()),
        0.0,
    );
    store.save_result(id, &failed).unwrap();
    let warning = |probe: Option<&str>| Warning {
        kind: "high-variation".into(),
        probe: probe.map(str::to_string),
        severity: Severity::Warn,
        message: "a plain message".into(),
        advice: "plain advice".into(),
    };
    store.save_warnings(id, &[warning(None), warning(Some("os.syscall.null"))]).unwrap();
    store.interrupt_run(id, "a plain stop").unwrap();
    store.finish_run(id, RunStatus::Complete).unwrap();
    drop(store);
    // The store escapes reasons and warnings it is given; a crafted file holds them raw.
    let c = rusqlite::Connection::open(db).unwrap();
    if field == Field::Reason {
        c.execute(
            "UPDATE results SET reason = ?1 WHERE run_id = ?2 AND reason IS NOT NULL",
            (hostile("reason"), id),
        )
        .unwrap();
    }
    if field == Field::Warning {
        // The advice is a row of `texts` (schema version 6), referred to by id.
        c.execute("INSERT OR IGNORE INTO texts (text) VALUES (?1)", [hostile("advice")]).unwrap();
        c.execute(
            "UPDATE warnings SET message = ?1, advice_id = (SELECT id FROM texts WHERE text = ?2)
             WHERE run_id = ?3",
            (hostile("message"), hostile("advice"), id),
        )
        .unwrap();
    }
    if field == Field::RunReason {
        c.execute("UPDATE runs SET reason = ?1 WHERE id = ?2", (hostile("stop"), id)).unwrap();
    }
    id
}

/// Every field poisoned at once, in a normal run and a crosscheck run (whose reasons `show`
/// prints as footnotes).
fn crafted_db(db: &Path) {
    for suite in ["quick", "crosscheck"] {
        for f in [
            Field::Label,
            Field::Host,
            Field::Params,
            Field::Notes,
            Field::Warning,
            Field::Reason,
            Field::RunReason,
        ] {
            crafted_run(db, suite, f);
        }
    }
}

#[test]
fn crafted_text_reaches_no_terminal_raw_through_runs_show_compare_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crafted.db");
    crafted_db(&db);
    let ids: Vec<String> = (1..=14).map(|i| i.to_string()).collect();

    assert_safe("runs", &ok(&run(&db, &["runs"])));
    for id in &ids {
        assert_safe(&format!("show {id}"), &ok(&run(&db, &["show", id])));
        for format in ["csv", "markdown"] {
            let o = ok(&run(&db, &["export", id, "--format", format]));
            assert_safe(&format!("export {id} --format {format}"), &o);
        }
    }
    let mut args = vec!["compare"];
    args.extend(ids.iter().map(String::as_str));
    assert_safe("compare", &ok(&run(&db, &args)));
    args.push("--markdown");
    assert_safe("compare --markdown", &ok(&run(&db, &args)));

    // The gate's summaries and the history, which print labels, hosts and parameters too.
    let junit = dir.path().join("gate.xml");
    let md = dir.path().join("gate.md");
    let mut gate = vec!["compare", "--across-machines", "--fail-on", "regression"];
    gate.extend(ids.iter().map(String::as_str));
    let (j, m) = (format!("--junit={}", junit.display()), format!("--markdown={}", md.display()));
    gate.extend([j.as_str(), m.as_str()]);
    let o = run(&db, &gate);
    assert_safe("compare --fail-on", &text(&o.stdout));
    assert_safe("compare --markdown=FILE", &std::fs::read_to_string(&md).unwrap());
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_safe("compare --junit", &xml);
    roxmltree::Document::parse(&xml).expect("the JUnit XML of crafted runs parses");
    let history = dir.path().join("history.html");
    let o = ok(&run(&db, &["history", "os.syscall.null", "--report", history.to_str().unwrap()]));
    assert_safe("history", &o);
    let page = std::fs::read_to_string(&history).unwrap();
    assert!(!page.contains('\x1b') && !page.contains('\u{202e}'), "the history page escapes");
    for format in ["bencher", "conbench"] {
        let o = common::bin()
            .arg("--db")
            .arg(&db)
            .args(["export", "1", "--format", format])
            .env("CONBENCH_PROJECT_REPOSITORY", "o/r")
            .output()
            .unwrap();
        assert_safe(&format!("export --format {format}"), &ok(&o));
    }

    // A spreadsheet does not run a formula from a cell.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute(
        "UPDATE runs SET label = '=HYPERLINK(\"http://evil.example\",\"x\")' WHERE id = 2",
        [],
    )
    .unwrap();
    c.execute(
        "UPDATE results SET reason = '@SUM(1+1)' WHERE run_id = 2 AND reason IS NOT NULL",
        [],
    )
    .unwrap();
    let csv = ok(&run(&db, &["export", "2", "--format", "csv"]));
    for line in csv.lines().skip(1) {
        assert!(line.contains(",\"'=HYPERLINK(") || line.contains(",'=HYPERLINK("), "{line}");
    }
    assert!(csv.contains("'@SUM(1+1)"), "{csv}");

    // JSON is for programs: it keeps the text exactly (escaped by JSON itself).
    let json = ok(&run(&db, &["export", "1", "--format", "json"]));
    assert!(!json.contains('\x1b'), "JSON escapes control characters itself");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["run"]["label"], hostile("label"));
}

#[test]
fn import_push_and_pull_refuse_a_run_with_such_text_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let crafted = dir.path().join("crafted.db");
    let fields = [
        (Field::Label, "label: U+001B (escape)"),
        (Field::Host, "host: U+001B (escape)"),
        (Field::Params, "result 0 (os.syscall.null) params: U+001B (escape)"),
        (Field::Notes, "result 0 (os.syscall.null) notes.note: U+001B (escape)"),
        (Field::Warning, "warning message: U+001B (escape)"),
        (Field::Reason, "result 1 (os.pipe.latency) reason: U+001B (escape)"),
        (Field::RunReason, "reason: U+001B (escape)"),
    ];
    for (f, _) in fields {
        crafted_run(&crafted, "quick", f);
    }
    let clean = crafted_run(&crafted, "quick", Field::Nothing);

    let into = dir.path().join("into.db");
    let o = run(&into, &["import", crafted.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}\n{}", text(&o.stderr));
    assert_safe("import", &out);
    assert_safe("import's errors", &text(&o.stderr));
    for (i, (field, named)) in fields.iter().enumerate() {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("run #{} ", i + 1)))
            .unwrap_or_else(|| panic!("no line for run #{}: {out}", i + 1));
        assert!(line.contains("REFUSED") && line.contains(named), "{field:?}: {line}");
    }
    assert!(out.contains("1 copied") && out.contains("7 refused"), "{out}");
    let copied = Store::open_existing(&into).unwrap().runs().unwrap();
    assert_eq!(copied.len(), 1, "only the clean run is copied");
    assert_eq!(copied[0].uuid, Store::open_existing(&crafted).unwrap().identity(clean).unwrap().0);

    // push and pull go through the same door.
    let pushed = dir.path().join("pushed.db");
    let o = run(&crafted, &["push", "--to", pushed.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stdout).contains("7 refused"), "{}", text(&o.stdout));
    let pulled = dir.path().join("pulled.db");
    let o = run(&pulled, &["pull", "--from", crafted.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stdout).contains("7 refused"), "{}", text(&o.stdout));
    assert_eq!(Store::open_existing(&pulled).unwrap().runs().unwrap().len(), 1);
}
