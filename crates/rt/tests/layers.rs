//! Keeps schedlab-rt in its layers (docs/ARCHITECTURE.md, "schedlab-rt").
//!
//! Reads `crates/rt/src`, draws the import graph between its top-level modules
//! (a directory module such as `processor/` or `sync/` is one unit; a name
//! re-exported by `lib.rs` counts as its module; `super::` in a top-level file
//! is `lib.rs`; comments and a file's `mod tests` are left out), and checks each
//! import against [`LAYERS`]: a file imports its own layer and the layers
//! below; the only way up is [`INTERFACE`], `src/hooks.rs`, and each import
//! that crosses a layer upward is listed by name in [`UP`]. A new file must be
//! given a layer here. It prints the graph's counts, the figures
//! docs/ARCHITECTURE.md quotes (`cargo test -p schedlab-rt --test layers --
//! --nocapture`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, bottom first, and the units in each.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "machine",
        &["loom", "futex", "arch", "stack", "cputimer", "sigframe", "uffd", "userfaultfd", "ring"],
    ),
    (
        "data",
        &[
            "task",
            "lifecycle",
            "park",
            "slot",
            "handoff",
            "queue",
            "priority",
            "budget",
            "cputime",
            "wait",
            "timer",
            "spin",
            "registry",
            "event",
            "idle",
            "reclaim",
            "pollplace",
        ],
    ),
    ("processor", &["processor", "machine", "state", "guard"]),
    ("policy", &["hooks", "preempt", "blocking", "monitor", "poll", "shared", "realtime"]),
    ("api", &["thread", "sync", "scope", "local", "net", "io", "runtime", "yielder", "lib"]),
];

/// The one module through which a lower layer names something above it.
const INTERFACE: &str = "hooks";

/// Every import allowed to cross a layer upward: the lower units that take
/// names from above (through the interface), and the names the interface
/// itself takes from the layer above its own.
const UP: &[(&str, &str)] = &[
    ("arch", INTERFACE),
    ("stack", INTERFACE),
    ("task", INTERFACE),
    ("idle", INTERFACE),
    ("reclaim", INTERFACE),
    ("spin", INTERFACE),
    ("timer", INTERFACE),
    ("wait", INTERFACE),
    ("machine", INTERFACE),
    ("processor", INTERFACE),
    (INTERFACE, "local"),
    (INTERFACE, "thread"),
];

/// Issue 24's goal: imports back up, at most.
const MAX_UP: usize = 15;
/// Issue 24's goal for circles, held by the graph without the interface: a
/// re-export in `hooks.rs` is an edge too, so the graph with it is one circle
/// by construction (docs/ARCHITECTURE.md, "Counts").
const MAX_CIRCLE: usize = 6;

/// One import: the file it is in, the text imported, the unit it reaches.
#[derive(Debug, Clone)]
struct Import {
    file: String,
    text: String,
    to: String,
}

/// Every `.rs` file under `dir`, as (path relative to `src`, contents).
fn sources(src: &Path) -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in fs::read_dir(dir).expect("crates/rt/src is readable") {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut paths = Vec::new();
    walk(src, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(src).unwrap().to_string_lossy().into_owned();
            (rel, fs::read_to_string(&p).expect("a source file is UTF-8"))
        })
        .collect()
}

/// The unit of a file: its first path component without `.rs`.
fn unit_of(rel: &str) -> String {
    let first = rel.split('/').next().unwrap();
    first.strip_suffix(".rs").unwrap_or(first).to_string()
}

/// The source without `//` comments and without its `mod tests`.
fn code_of(src: &str) -> String {
    let mut out: String = src
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(i) = out.find("#[cfg(test)]\nmod tests") {
        out.truncate(i);
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier starting at `s`'s beginning.
fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
    &s[..end]
}

/// Positions where `word` starts at an identifier boundary.
fn occurrences<'a>(code: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    code.match_indices(word).filter_map(move |(i, _)| {
        let before = code[..i].chars().next_back();
        (!before.is_some_and(is_ident)).then_some(i + word.len())
    })
}

/// The first names of each path in a `crate::{a::b, c, d::{e, f}}` group:
/// `a`, `c`, `d`.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut at_start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => at_start = true,
            c if at_start && depth == 0 && is_ident(c) => {
                heads.push(ident(&group[i..]).to_string());
                at_start = false;
            }
            _ => {}
        }
    }
    heads
}

/// `lib.rs`'s `pub use crate::{module::{Name, ..}, ..}`: name → module.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let code = code_of(lib);
    let Some(start) = code.find("pub use crate::{") else {
        return map;
    };
    let body = &code[start + "pub use crate::{".len()..];
    let body = &body[..body.find("};").expect("the re-export list ends")];
    let mut depth = 0;
    let mut module = String::new();
    let mut at_start = true;
    let mut i = 0;
    while i < body.len() {
        let c = body[i..].chars().next().unwrap();
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => at_start = true,
            c if is_ident(c) => {
                let name = ident(&body[i..]);
                if depth == 0 && at_start {
                    module = name.to_string();
                    at_start = false;
                    // `module::Name` with no braces.
                    let rest = &body[i + name.len()..];
                    if let Some(r) = rest.strip_prefix("::") {
                        if !r.starts_with('{') {
                            map.insert(ident(r).to_string(), module.clone());
                        }
                    }
                } else if depth > 0 {
                    map.insert(name.to_string(), module.clone());
                }
                i += name.len();
                continue;
            }
            _ => {}
        }
        i += c.len_utf8();
    }
    map
}

/// Every import between units, as `graph2.py` draws them.
fn imports(src: &Path) -> (BTreeSet<String>, Vec<Import>) {
    let files = sources(src);
    let units: BTreeSet<String> = files.iter().map(|(r, _)| unit_of(r)).collect();
    let lib = files.iter().find(|(r, _)| r == "lib.rs").expect("src/lib.rs");
    let reexp = reexports(&lib.1);
    let resolve = |name: &str| -> String {
        if units.contains(name) {
            name.to_string()
        } else {
            reexp.get(name).cloned().unwrap_or_else(|| "lib".to_string())
        }
    };
    let mut out = Vec::new();
    for (rel, text) in &files {
        let from = unit_of(rel);
        let code = code_of(text);
        let mut push = |text: String, to: String| {
            if to != from {
                out.push(Import { file: format!("crates/rt/src/{rel}"), text, to });
            }
        };
        for end in occurrences(&code, "crate::") {
            let rest = &code[end..];
            if rest.starts_with('{') {
                let close = rest.find('}').map_or(rest.len(), |_| {
                    // The group ends at its matching brace.
                    let mut depth = 0;
                    let mut at = rest.len();
                    for (i, c) in rest.char_indices() {
                        match c {
                            '{' => depth += 1,
                            '}' => {
                                depth -= 1;
                                if depth == 0 {
                                    at = i;
                                    break;
                                }
                            }
                            _ => {}
                        }
                    }
                    at
                });
                for head in group_heads(&rest[1..close]) {
                    push(format!("crate::{{{head}, ..}}"), resolve(&head));
                }
            } else {
                let head = ident(rest);
                if head.is_empty() {
                    continue;
                }
                let path_end =
                    rest.find(|c: char| !(is_ident(c) || c == ':')).unwrap_or(rest.len());
                let path = rest[..path_end].trim_end_matches(':');
                push(format!("crate::{path}"), resolve(head));
            }
        }
        if !rel.contains('/') {
            for end in occurrences(&code, "super::") {
                let head = ident(&code[end..]);
                if head.is_empty() {
                    continue;
                }
                let to = if units.contains(head) { head.to_string() } else { "lib".to_string() };
                push(format!("super::{head}"), to);
            }
        }
    }
    (units, out)
}

/// The strongly connected components of `edges` with more than one unit.
fn circles(
    units: &BTreeSet<String>,
    edges: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<Vec<String>> {
    // Kosaraju: finish order on the graph, then components on its reverse.
    fn finish(
        v: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        seen: &mut BTreeSet<String>,
        order: &mut Vec<String>,
    ) {
        if !seen.insert(v.to_string()) {
            return;
        }
        for w in edges.get(v).into_iter().flatten() {
            finish(w, edges, seen, order);
        }
        order.push(v.to_string());
    }
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for u in units {
        finish(u, edges, &mut seen, &mut order);
    }
    let mut reverse: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, bs) in edges {
        for b in bs {
            reverse.entry(b.clone()).or_default().insert(a.clone());
        }
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for v in order.iter().rev() {
        let mut comp = Vec::new();
        finish(v, &reverse, &mut seen, &mut comp);
        if comp.len() > 1 {
            comp.sort();
            out.push(comp);
        }
    }
    out
}

fn layer_of() -> BTreeMap<&'static str, (usize, &'static str)> {
    let mut map = BTreeMap::new();
    for (i, (name, units)) in LAYERS.iter().enumerate() {
        for u in *units {
            assert!(map.insert(*u, (i, *name)).is_none(), "{u} is in two layers of LAYERS");
        }
    }
    map
}

/// The rules, checked over the imports of `src`; each broken one is a line
/// naming the file and the import.
fn check(src: &Path) -> Result<String, Vec<String>> {
    let (units, imports) = imports(src);
    let layers = layer_of();
    let mut errors = Vec::new();
    for u in &units {
        if !layers.contains_key(u.as_str()) {
            errors.push(format!(
                "crates/rt/src/{u}: a unit in no layer; add it to LAYERS in crates/rt/tests/layers.rs \
                 (and to the drawing in docs/ARCHITECTURE.md)"
            ));
        }
    }
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut up_seen = BTreeSet::new();
    let mut up_all = BTreeSet::new();
    for imp in &imports {
        let from = unit_of(imp.file.trim_start_matches("crates/rt/src/"));
        edges.entry(from.clone()).or_default().insert(imp.to.clone());
        let (Some(&(lf, lname)), Some(&(lt, tname))) =
            (layers.get(from.as_str()), layers.get(imp.to.as_str()))
        else {
            continue;
        };
        if lt <= lf {
            continue;
        }
        up_all.insert((from.clone(), imp.to.clone()));
        if UP.contains(&(from.as_str(), imp.to.as_str())) {
            up_seen.insert((from.clone(), imp.to.clone()));
            continue;
        }
        errors.push(format!(
            "{}: `{}` reaches up from the {lname} layer to {} in the {tname} layer; \
             name it in crates/rt/src/{INTERFACE}.rs and import it from there",
            imp.file, imp.text, imp.to
        ));
    }
    for (a, b) in UP {
        if !up_seen.contains(&(a.to_string(), b.to_string())) {
            errors.push(format!(
                "UP in crates/rt/tests/layers.rs allows {a} -> {b}, which no import uses any \
                 more: remove it"
            ));
        }
    }
    // The interface holds re-exports only: no code of its own to grow into a
    // layer of its own.
    let iface = fs::read_to_string(src.join(format!("{INTERFACE}.rs"))).unwrap_or_else(|e| {
        errors.push(format!("crates/rt/src/{INTERFACE}.rs: {e}"));
        String::new()
    });
    let iface_code = code_of(&iface);
    let mut item = String::new();
    for line in iface_code.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("#[") {
            continue;
        }
        item.push_str(t);
        item.push(' ');
        if t.ends_with(';') {
            if !item.starts_with("pub(crate) use crate::") {
                errors.push(format!(
                    "crates/rt/src/{INTERFACE}.rs: `{}` is not a re-export; the interface only \
                     names what lives in the layers above",
                    item.trim()
                ));
            }
            item.clear();
        }
    }
    if !item.trim().is_empty() {
        errors.push(format!("crates/rt/src/{INTERFACE}.rs: `{}` is not a re-export", item.trim()));
    }
    let all = circles(&units, &edges);
    let without: BTreeMap<String, BTreeSet<String>> = edges
        .iter()
        .filter(|(a, _)| a.as_str() != INTERFACE)
        .map(|(a, bs)| {
            (a.clone(), bs.iter().filter(|b| b.as_str() != INTERFACE).cloned().collect())
        })
        .collect();
    let inner = circles(&units, &without);
    for c in &inner {
        if c.len() > MAX_CIRCLE {
            errors.push(format!(
                "a circle of {} units without the interface (at most {MAX_CIRCLE}): {}",
                c.len(),
                c.join(" ")
            ));
        }
    }
    if up_seen.len() > MAX_UP {
        errors.push(format!("{} imports back up (at most {MAX_UP})", up_seen.len()));
    }
    let n_edges: usize = edges.values().map(BTreeSet::len).sum();
    let largest = |cs: &[Vec<String>]| cs.iter().map(Vec::len).max().unwrap_or(0);
    let summary = format!(
        "units {}, imports {n_edges}, imports back up {} (from {} units), largest circle {} \
         (through {INTERFACE}), {} without it: {:?}",
        units.len(),
        up_all.len(),
        up_all.iter().map(|(a, _)| a).collect::<BTreeSet<_>>().len(),
        largest(&all),
        largest(&inner),
        inner
    );
    if std::env::var_os("LAYERS_EDGES").is_some() {
        for (a, bs) in &edges {
            let bs: Vec<&str> = bs.iter().map(String::as_str).collect();
            println!("{a} -> {}", bs.join(" "));
        }
    }
    if errors.is_empty() {
        Ok(summary)
    } else {
        errors.push(summary);
        Err(errors)
    }
}

/// `crates/rt/src`, or the tree `SCHEDLAB_RT_SRC` names (to count another
/// version's imports: the rules fail there, and the message has its counts).
fn src_dir() -> PathBuf {
    match std::env::var_os("SCHEDLAB_RT_SRC") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
    }
}

#[test]
fn every_import_goes_down_or_through_the_interface() {
    match check(&src_dir()) {
        Ok(summary) => println!("{summary}"),
        Err(errors) => panic!("schedlab-rt's layers are broken:\n{}", errors.join("\n")),
    }
}

/// A copy of `src` with one file's text changed, in a fresh directory.
fn altered_copy(name: &str, file: &str, edit: impl FnOnce(String) -> String) -> PathBuf {
    let dst =
        std::env::temp_dir().join(format!("schedlab-rt-layers-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dst);
    let src = src_dir();
    let mut edit = Some(edit);
    for (rel, text) in sources(&src) {
        let to = dst.join(&rel);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        let text = match edit.take_if(|_| rel == file) {
            Some(edit) => edit(text),
            None => text,
        };
        fs::write(to, text).unwrap();
    }
    dst
}

#[test]
fn an_import_up_past_the_interface_is_named_with_its_file() {
    // timer.rs wakes a thread through the interface; naming the processor
    // directly is the kind of import the layers forbid.
    let dir = altered_copy("timer", "timer.rs", |t| {
        assert!(t.contains("crate::hooks::unpark_user("), "timer.rs changed; pick another import");
        t.replace("crate::hooks::unpark_user(", "crate::processor::unpark_user(")
    });
    let errors = check(&dir).expect_err("an upward import must fail the check");
    let _ = fs::remove_dir_all(&dir);
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("crates/rt/src/timer.rs: `crate::processor::unpark_user`")
                && e.contains("data layer")),
        "{errors:#?}"
    );
}

#[test]
fn a_file_in_no_layer_and_code_in_the_interface_are_reported() {
    let dir = altered_copy("newfile", "hooks.rs", |t| t + "\npub(crate) fn helper() {}\n");
    fs::write(dir.join("newcomer.rs"), "//! A file nobody placed.\n").unwrap();
    let errors = check(&dir).expect_err("an unplaced file must fail the check");
    let _ = fs::remove_dir_all(&dir);
    assert!(
        errors.iter().any(|e| e.starts_with("crates/rt/src/newcomer: a unit in no layer")),
        "{errors:#?}"
    );
    assert!(errors.iter().any(|e| e.contains("is not a re-export")), "{errors:#?}");
}

#[test]
fn the_reader_parses_groups_and_reexports() {
    assert_eq!(group_heads("a::b, c, d::{e, f::{g}}, h"), ["a", "c", "d", "h"]);
    let lib = "pub use crate::{\n    blocking::blocking,\n    event::{Detection, Event},\n};";
    let map = reexports(lib);
    assert_eq!(map.get("blocking").map(String::as_str), Some("blocking"));
    assert_eq!(map.get("Event").map(String::as_str), Some("event"));
    assert_eq!(map.get("Detection").map(String::as_str), Some("event"));
}
