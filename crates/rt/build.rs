//! Build script: declares the `loom` cfg so `cfg(loom)` model-checking builds
//! (`RUSTFLAGS="--cfg loom"`) do not trip the `unexpected_cfgs` lint.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
