//! Measures one variant of `threads.net.echo` and prints it — the way to put a server
//! outside the lab (Go's, in peers/go/echo) under the probe's own client:
//!
//! ```text
//! cargo run --release -p schedlab-probes --example echo -- connections=256,backend=os
//! cargo run --release -p schedlab-probes --example echo -- connections=256,server=127.0.0.1:7000,server_pid=4242
//! ```
//!
//! The argument is the variant's parameters as `KEY=VALUE,...` (docs/PROBES.md); the
//! sampling is the quick suite's for this probe (`--full`: the full suite's; `--smoke`:
//! two samples of two waves, to check a server works). The binary
//! is also the probe's client when started with the client's hidden first argument, as
//! the `schedlab` binary is. Prints the median time per round trip, round trips per
//! second, the median's 95% interval and the notes; exits 1 on a failure, 2 on bad
//! arguments.

use std::process::ExitCode;

use schedlab_measure::clock::Calibration;
use schedlab_measure::model::Params;
use schedlab_measure::sampler::{self, Settings};
use schedlab_measure::stats::Summary;
use schedlab_probes::threads::echo::{client_main, CLIENT_ARG};
use schedlab_probes::{catalog, Context, Suite};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == CLIENT_ARG) {
        return ExitCode::from(u8::try_from(client_main(&args[1..])).unwrap_or(1));
    }
    let full = args.iter().any(|a| a == "--full");
    let smoke = args.iter().any(|a| a == "--smoke");
    let spec: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let [spec] = spec[..] else {
        eprintln!(
            "usage: echo [--full|--smoke] KEY=VALUE,... (e.g. connections=256,backend=rt,io=std)"
        );
        return ExitCode::from(2);
    };
    if let Some(bad) = spec.split(',').find(|kv| !kv.contains('=')) {
        eprintln!("echo: {bad:?} is not KEY=VALUE");
        return ExitCode::from(2);
    }
    let params = Params::from_key(spec);
    let suite = match (full, smoke) {
        (true, _) => Suite::Full,
        (_, true) => Suite::Smoke,
        _ => Suite::Quick,
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("echo: cannot find this program to run its client: {e}");
            return ExitCode::from(1);
        }
    };
    let ctx = Context { suite, exec_helper: Some((exe, Vec::new())), ..Context::for_tests() };
    let all = catalog();
    let probe = all.iter().find(|p| p.info().id == "threads.net.echo").expect("in the catalog");
    let base = match suite {
        Suite::Full => Settings::full(),
        Suite::Smoke => Settings::smoke(),
        Suite::Quick => Settings::quick(),
    };
    let settings = probe.sampling(suite, &base);
    let result = probe.setup(&params, &ctx).and_then(|mut inst| {
        let metric = inst.metric();
        let c = sampler::collect_in(
            &mut *inst,
            &settings,
            &Calibration::zero(),
            metric,
            probe.info().unit,
        )?;
        Ok((c, inst.notes()))
    });
    match result {
        Ok((c, notes)) => {
            let v: Vec<f64> = c.samples.iter().map(|s| s.value).collect();
            let s = Summary::of(&v).expect("samples have values");
            println!(
                "{params}\t{:.1} ns/round trip\t{:.0} round trips/s\t[{:.1} .. {:.1}]\t{} samples\t{notes}",
                s.median,
                1e9 / s.median,
                s.ci_low,
                s.ci_high,
                v.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("echo [{params}]: {e}");
            ExitCode::from(1)
        }
    }
}
