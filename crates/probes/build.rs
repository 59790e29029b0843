//! Compiles `csrc/pthread_bench.c`, the C program the threads probes run under glibc's
//! threads (`backend=pthread-os`) and under libschedlab_pthread.so (`backend=pthread-rt`),
//! with the C compiler the `cc` crate finds (`CC`, else `cc`), into `OUT_DIR`.
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
