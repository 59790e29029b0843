"""The toolchain claim: every workspace crate inherits the workspace's rust-version, and no
locked dependency needs a newer Rust than it says. Reads `cargo metadata` on stdin.

The project's own code is not compiled with that old toolchain (none is installed offline);
this catches the usual way the claim goes false, a dependency bump."""
import json
import sys


def ver(v):
    parts = [int(x) for x in v.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


d = json.load(sys.stdin)
members = set(d["workspace_members"])
ours = [p for p in d["packages"] if p["id"] in members]
declared = {p["rust_version"] for p in ours}
if len(declared) != 1 or None in declared:
    listing = ", ".join(f"{p['name']}={p['rust_version']}" for p in ours)
    sys.exit(f"crates disagree on rust-version: {listing}")
msrv = declared.pop()
newer = [
    f"{p['name']} {p['version']} needs {p['rust_version']}"
    for p in d["packages"]
    if p["id"] not in members and p.get("rust_version") and ver(p["rust_version"]) > ver(msrv)
]
if newer:
    sys.exit(f"rust-version {msrv} is not true: " + "; ".join(newer))
print(f"rust-version {msrv}: {len(ours)} crates inherit it; no locked dependency needs a newer Rust")
