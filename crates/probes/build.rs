//! Compiles `csrc/pthread_bench.c`, the C program the threads probes run under glibc's
//! threads (`backend=pthread-os`) and under libschedlab_pthread.so (`backend=pthread-rt`),
//! with the C compiler the `cc` crate finds (`CC`, else `cc`), into `OUT_DIR`.
//!
//! For the memory lab (seed 004, issue 26) it also builds `csrc/clears.c` into
//! `libschedlab_clears.so` (the preload library `mem.clears` runs real programs under), and
//! `csrc/clear_loops.c` once per compiler (gcc, clang: whichever is on PATH), optimisation
//! level (-O0, -O2, -O3) and loop (byte, word) into static libraries linked into this crate;
//! `nm -u` on each says whether the compiler turned the loop into a call to `memset`. What
//! was built, or why not, is written to `OUT_DIR/clear_loops.rs` for `mem::cloops`.
//!
//! The crate embeds the binary (`include_bytes!`), so `schedlab` carries it wherever it
//! is copied. A machine without a C compiler still builds everything else: this script then
//! writes the reason instead of the binary, prints it as a cargo warning, and the probes
//! skip their pthread backends with that reason at run time.

use std::path::PathBuf;
use std::process::Command;

const SOURCE: &str = "csrc/pthread_bench.c";

fn main() {
    println!("cargo::rerun-if-changed={SOURCE}");
    println!("cargo::rerun-if-changed=build.rs");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let binary = out_dir.join("pthread_bench");
    let constant = match compile(&binary) {
        Ok(()) => format!("Ok(include_bytes!({:?}))", binary.display().to_string()),
        Err(why) => {
            println!("cargo::warning=the pthread probes' C program was not built: {why}");
            format!("Err({:?})", format!("no C program: it was not built ({why})"))
        }
    };
    let code = format!(
        "/// The compiled `{SOURCE}`, or why it was not built.\n\
         pub(super) const PROGRAM: Result<&[u8], &str> = {constant};\n"
    );
    std::fs::write(out_dir.join("pthread_bench.rs"), code).expect("OUT_DIR is writable");
    // Seed 004 (issue 26).
    clears_library(&out_dir);
    clear_loops(&out_dir);
}

const CLEARS: &str = "csrc/clears.c";
const LOOPS: &str = "csrc/clear_loops.c";

/// `libschedlab_clears.so`, embedded by `mem::clears` (`Err`: why it was not built).
fn clears_library(out_dir: &std::path::Path) {
    println!("cargo::rerun-if-changed={CLEARS}");
    let lib = out_dir.join("libschedlab_clears.so");
    let built = (|| {
        let compiler = cc::Build::new()
            .cargo_warnings(false)
            .try_get_compiler()
            .map_err(|e| format!("no C compiler: {e}"))?;
        let mut cmd: Command = compiler.to_command();
        cmd.args(["-O2", "-shared", "-fPIC", "-o"]).arg(&lib).arg(CLEARS).arg("-ldl");
        let out = cmd.output().map_err(|e| format!("running {:?}: {e}", compiler.path()))?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        Err(format!("{:?} failed: {}", compiler.path(), stderr.lines().next().unwrap_or("")))
    })();
    let constant = match built {
        Ok(()) => format!("Ok(include_bytes!({:?}))", lib.display().to_string()),
        Err(why) => {
            println!("cargo::warning=the clearing recorder was not built: {why}");
            format!("Err({:?})", format!("the recorder library was not built ({why})"))
        }
    };
    let code = format!(
        "/// The compiled `{CLEARS}`, or why it was not built.\n\
         pub(super) const LIBRARY: Result<&[u8], &str> = {constant};\n"
    );
    std::fs::write(out_dir.join("clears_lib.rs"), code).expect("OUT_DIR is writable");
}

/// Whether `tool --version` runs: the compiler's first line of version, or `None`.
fn version_of(tool: &str) -> Option<String> {
    let out = Command::new(tool).arg("--version").output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or(tool).trim().to_string()
    })
}

/// The byte and word loops of `csrc/clear_loops.c` per compiler and level, as a Rust table:
/// `CLoopBuilt { compiler, level, loop_, built: Ok((fn, calls_memset)) | Err(why) }`.
fn clear_loops(out_dir: &std::path::Path) {
    println!("cargo::rerun-if-changed={LOOPS}");
    let mut externs = String::new();
    let mut rows = String::new();
    for compiler in ["gcc", "clang"] {
        let version = version_of(compiler);
        for level in ["0", "2", "3"] {
            for which in ["byte", "word"] {
                let tag = format!("{compiler}_O{level}");
                let symbol = format!("schedlab_loop_{which}_{tag}");
                let lib = format!("schedlab_loop_{which}_{tag}");
                let built: Result<bool, String> = match &version {
                    None => Err(format!("{compiler} was not on PATH when schedlab was built")),
                    Some(_) => cc::Build::new()
                        .cargo_warnings(false)
                        .compiler(compiler)
                        .opt_level_str(level)
                        .debug(false)
                        .define("TAG", tag.as_str())
                        .define(if which == "byte" { "LOOP_BYTE" } else { "LOOP_WORD" }, None)
                        .file(LOOPS)
                        .try_compile(&lib)
                        .map_err(|e| format!("{compiler} -O{level} failed: {e}"))
                        .and_then(|()| calls_memset(&out_dir.join(format!("lib{lib}.a")))),
                };
                let cell = match built {
                    Ok(memset) => {
                        externs.push_str(&format!("    fn {symbol}(p: *mut u8, n: usize);\n"));
                        format!(
                            "Ok(({symbol} as unsafe extern \"C\" fn(*mut u8, usize), {memset}))"
                        )
                    }
                    Err(why) => format!("Err({why:?})"),
                };
                let version = version.clone().unwrap_or_default();
                rows.push_str(&format!(
                    "    CLoopBuilt {{ compiler: {compiler:?}, version: {version:?}, level: \"O{level}\", loop_: {which:?}, built: {cell} }},\n"
                ));
            }
        }
    }
    let code = format!(
        "unsafe extern \"C\" {{\n{externs}}}\n\n\
         /// Every loop of `{LOOPS}` per compiler and level: its function and whether the \
         compiler made it call `memset`, or why it was not built.\n\
         pub(super) const BUILT: &[CLoopBuilt] = &[\n{rows}];\n"
    );
    std::fs::write(out_dir.join("clear_loops.rs"), code).expect("OUT_DIR is writable");
}

/// Whether the archive's object calls `memset` (an undefined `memset`, as `nm -u` lists it).
fn calls_memset(archive: &std::path::Path) -> Result<bool, String> {
    let out = Command::new("nm")
        .arg("-u")
        .arg(archive)
        .output()
        .map_err(|e| format!("nm, to read the object's calls: {e}"))?;
    if !out.status.success() {
        return Err(format!("nm -u {} failed", archive.display()));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.split_whitespace().last() == Some("memset")))
}

/// Runs the C compiler on the source; why not, when it fails.
fn compile(binary: &std::path::Path) -> Result<(), String> {
    let compiler = cc::Build::new()
        .cargo_warnings(false)
        .try_get_compiler()
        .map_err(|e| format!("no C compiler: {e}"))?;
    let mut cmd: Command = compiler.to_command();
    cmd.args(["-O2", "-pthread", "-o"]).arg(binary).arg(SOURCE).arg("-ldl");
    let out = cmd.output().map_err(|e| format!("running {:?}: {e}", compiler.path()))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("no message");
    Err(format!("{:?} failed ({}): {first}", compiler.path(), out.status))
}
