//! Spawns and joins user threads in a loop, for counting what a spawn costs in system
//! calls (`strace -c -f`): in the steady state, none.
//!
//! ```text
//! cargo build --release -p schedlab-rt --example spawn_loop
//! strace -c -f target/release/examples/spawn_loop 1000000 1     # threads, processors
//! strace -c -f target/release/examples/spawn_loop 1000000 2 1000  # ... in batches of 1000
//! ```

use schedlab_rt::{spawn, Runtime};
use std::hint::black_box;

fn main() {
    let arg = |i: usize, default: usize| {
        std::env::args().nth(i).map_or(default, |a| a.parse().expect("a number"))
    };
    let (threads, processors, batch) = (arg(1, 1_000_000), arg(2, 1), arg(3, 1));
    let rt = Runtime::builder().processors(processors).build().expect("a runtime");
    let sum = rt
        .block_on(move || {
            let mut sum = 0usize;
            for b in 0..threads / batch {
                let hs: Vec<_> =
                    (0..batch).map(|i| spawn(move || black_box(b * batch + i))).collect();
                sum += hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>();
            }
            sum
        })
        .expect("no deadlock");
    let n = threads / batch * batch;
    assert_eq!(sum, n * (n - 1) / 2);
    println!("{n} threads spawned and joined on {processors} processor(s), batches of {batch}");
}
