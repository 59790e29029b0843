//! Process-wide counts around the poller, each test in a binary of its own
//! kind (descriptors and kernel threads are the process's): user threads
//! waiting on sockets hold no kernel thread, and a runtime dropped while
//! they wait neither hangs nor leaks their descriptors.

mod common;

use common::{runtime, watchdog};
use schedlab_rt::net::{TcpListener, TcpStream};
use std::io::Read;
use std::sync::Mutex;
use std::time::Duration;

/// The tests of this binary count process-wide things: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[test]
fn waiting_connections_hold_no_kernel_thread() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    watchdog(60, || {
        let rt = runtime(2);
        let (before, during) = rt
            .block_on(|| {
                let before = count("/proc/self/task");
                let l = TcpListener::bind("127.0.0.1:0").unwrap();
                let addr = l.local_addr().unwrap();
                let mut clients = Vec::new();
                let readers: Vec<_> = (0..300)
                    .map(|_| {
                        clients.push(TcpStream::connect(addr).unwrap());
                        let (mut s, _) = l.accept().unwrap();
                        schedlab_rt::spawn(move || s.read(&mut [0; 1]).unwrap())
                    })
                    .collect();
                // Let them all park (and the monitor see any blocked thread).
                schedlab_rt::sleep(Duration::from_millis(200));
                let during = count("/proc/self/task");
                drop(clients); // end of file for each reader
                for r in readers {
                    assert_eq!(r.join().unwrap(), 0);
                }
                (before, during)
            })
            .unwrap();
        // A few spare kernel threads may come and go; 300 blocked readers
        // on plain std would each hold one.
        assert!(
            during < before + 16,
            "{during} kernel threads with 300 readers waiting, {before} before"
        );
    });
}

#[test]
fn a_runtime_dropped_while_threads_wait_on_sockets_leaks_no_descriptor() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    watchdog(60, || {
        // The poller's own descriptors exist for good once made (by the
        // first call that waits).
        let (r, _w) = schedlab_rt::net::pipe().unwrap();
        r.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        let _ = (&r).read(&mut [0; 1]);
        drop((r, _w));
        let before = count("/proc/self/fd");
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        {
            let rt = runtime(2);
            let ready = std::sync::Arc::new(std::sync::Barrier::new(2));
            let r2 = ready.clone();
            rt.spawn(move || {
                // An accepting thread and reading threads, all parked.
                let listener = TcpListener::bind("127.0.0.1:0").unwrap();
                schedlab_rt::spawn(move || {
                    let _ = listener.accept();
                });
                for _ in 0..20 {
                    let mut s = TcpStream::connect(addr).unwrap();
                    schedlab_rt::spawn(move || {
                        let _ = s.read(&mut [0; 1]);
                    });
                }
                schedlab_rt::sleep(Duration::from_millis(50));
                schedlab_rt::blocking(|| r2.wait());
            });
            ready.wait();
            // Accepted on the server side, held here.
            let held: Vec<_> = (0..20).map(|_| l.accept().unwrap().0).collect();
            drop(rt);
            drop(held);
        }
        drop(l);
        let after = count("/proc/self/fd");
        if after != before {
            for e in std::fs::read_dir("/proc/self/fd").unwrap() {
                let e = e.unwrap();
                eprintln!("{:?} -> {:?}", e.file_name(), std::fs::read_link(e.path()));
            }
        }
        assert_eq!(after, before, "descriptors leaked by the dropped runtime");
    });
}
