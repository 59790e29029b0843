//! A threaded Rust program for `pthread_programs.rs`'s rustc check: it is compiled under
//! `schedlab exec` (rustc links jemalloc and runs LLVM's code generation in threads), then run.
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

fn main() {
    let m = Arc::new(Mutex::new(0u64));
    let (tx, rx) = mpsc::channel();
    let hs: Vec<_> = (0..16)
        .map(|i| {
            let m = m.clone();
            let tx = tx.clone();
            thread::spawn(move || {
                for j in 0..10000 {
                    *m.lock().unwrap() += 1;
                    if j % 1000 == 0 {
                        tx.send(i).unwrap();
                        thread::yield_now();
                    }
                }
                thread_local!(static X: std::cell::Cell<u64> = const { std::cell::Cell::new(0) });
                X.with(|x| x.set(i));
                X.with(|x| assert_eq!(x.get(), i));
            })
        })
        .collect();
    drop(tx);
    let n = rx.iter().count();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*m.lock().unwrap(), 160_000);
    assert_eq!(n, 160);
    println!("ok");
}
