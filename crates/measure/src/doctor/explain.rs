//! What each finding changes, for people: the keys in `collect`'s order and one paragraph per
//! key naming the probes and timeline scenarios it moves. Text only.

/// The keys of the findings, in the order [`super::collect`] gives them.
pub const KEYS: [&str; 17] = [
    "scheduler",
    "sched_ext",
    "hz",
    "nohz",
    "preempt",
    "timer_slack",
    "rt_throttling",
    "fair_server",
    "cpuidle",
    "halt_poll",
    "smt",
    "hypervisor",
    "cgroup",
    "tracefs",
    "perf",
    "cap_sys_nice",
    "clocksource",
];

/// Which probes and scenarios a finding changes and how, by key.
pub fn changes(key: &str) -> &'static str {
    match key {
        "scheduler" => {
            "how SCHED_OTHER threads share a CPU: EEVDF picks the eligible thread with the \
             earliest virtual deadline (slices of base_slice_ns: 0.75 ms times 1 + log2 of the \
             CPUs, at most 8) and lets a waking \
             thread preempt only when its deadline is earlier; CFS picked the smallest vruntime \
             with wakeup granularity. Changes timeline scenarios two-equal, four-equal, nice, \
             yield, budget, busy-vs-process (slice and gap lengths) and os.ctx.switch, \
             threads.switch, threads.wake (who runs after a wake-up)"
        }
        "sched_ext" => {
            "a loaded BPF scheduler replaces the fair class for the tasks it takes: every \
             SCHED_OTHER result and timeline (threads.*, os.ctx.switch, os.pipe.latency, \
             scenarios 1-8) then measures that scheduler, not EEVDF/CFS"
        }
        "hz" => {
            "the tick period (1/HZ): the granularity of tick-driven preemption checks, of \
             jiffies-based timeouts and of the tick-sampled CPU-time accounting behind \
             /proc/stat that noise attribution reads (unless the kernel accounts precisely). \
             Changes \
             scenarios one-busy, two-equal, busy-vs-process (slice ends), and the noise \
             columns of every result"
        }
        "nohz" => {
            "with NO_HZ_IDLE an idle CPU stops its tick, so the first wake-up after idle pays \
             for restarting it; NO_HZ_FULL also stops it on busy isolated CPUs. Changes \
             cross-CPU rows (os.pipe.latency placement=cross, threads.wake, \
             threads.condvar.pingpong) and the sleep scenario"
        }
        "preempt" => {
            "when a woken or higher-priority thread gets the CPU from a thread running kernel \
             code: none waits for the next return to user space or explicit preemption point, \
             voluntary adds cond_resched points, full preempts almost anywhere, lazy \
             preempts fair tasks at the next tick. Changes the wake-up latency of rt.preempt.*, \
             os.signal.catch, threads.wake and the fifo, yield-priority and rt-* scenarios \
             when the other thread is in a system call"
        }
        "timer_slack" => {
            "the kernel may end a non-real-time thread's sleep up to this much late, to \
             batch timer interrupts: the overshoot floor of the sleep scenario (which \
             measures it, then sets 1 ns), of budget and of rt-budget; real-time threads \
             get no slack. A process inherits its parent's slack"
        }
        "rt_throttling" => {
            "real-time threads may use only runtime/period of each CPU; the rest goes to \
             other classes. The rt-throttle and fifo scenarios show a busy SCHED_FIFO thread \
             stopped for the remainder of each period; -1 means a SCHED_FIFO thread can \
             starve everything else"
        }
        "fair_server" => {
            "since 6.12 a deadline server runs fair tasks for runtime/period even under a \
             busy real-time thread, instead of (or beside) RT throttling: what the \
             rt-throttle and fifo scenarios show starved, and for how long"
        }
        "cpuidle" => {
            "what an idle CPU does and how long it takes to wake: deep C-states add exit \
             latency to every wake-up of a sleeping CPU (cross-CPU os.pipe.latency, \
             os.unix.latency, threads.wake, threads.condvar.pingpong, the sleep scenario); \
             the haltpoll driver/governor spins in the guest before halting"
        }
        "halt_poll" => {
            "a vCPU that goes idle first polls (guest haltpoll or the host's KVM \
             halt_poll_ns) before it halts: a wake-up within the poll window is far cheaper \
             than one that exits to the host. Cross-CPU wake-up rows are bimodal around it"
        }
        "smt" => {
            "with SMT two logical CPUs share one core's execution units and caches: \
             placement=cross rows and threads.* results depend on whether the two CPUs are \
             siblings, and a busy sibling slows a probe down"
        }
        "hypervisor" => {
            "under a hypervisor the host steals time (noise columns, bimodal rows), \
             wake-ups of idle vCPUs may exit to the host, the clocksource may be paravirtual, \
             and the host's load changes results from day to day: compare runs of one \
             session, not of two days"
        }
        "cgroup" => {
            "the cgroup this process runs in: a cpu.max / cfs_quota limit throttles every \
             multi-threaded probe and scenario once the quota is used; cpuset limits the \
             CPUs the cross placements can use"
        }
        "tracefs" => {
            "the kernel recorder of `timeline --kernel` and `timeline --probe` \
             (sched_switch/sched_wakeup) needs tracefs and root: the command mounts tracefs \
             itself when it is not mounted (and unmounts it after); without root timelines are \
             sampled by the threads themselves only"
        }
        "perf" => {
            "perf_event_paranoid decides which perf events an unprivileged process may open: \
             crosscheck's `perf bench` references and hardware counters need it at 2 or \
             below (kernel events at 1 or below, -1 for everything)"
        }
        "cap_sys_nice" => {
            "whether schedlab may raise priorities: the fifo, yield-priority, rt-throttle \
             scenarios (SCHED_FIFO), nice scenarios below 0 and SCHED_DEADLINE; without it \
             they are skipped, not measured"
        }
        "clocksource" => {
            "what a clock read costs and how fine it is: tsc (and mostly kvm-clock) is read in user space \
             through the vDSO, hpet/acpi_pm need a system call and a slow device read (around a \
             microsecond) and inflate every short timing; the calibration line of each run measures it"
        }
        _ => "",
    }
}
