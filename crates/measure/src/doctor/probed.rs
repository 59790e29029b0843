//! What only a system call can tell (`uname`, the timer slack, CPUID, whether a privileged
//! policy may be set), asked once so the findings can be built from the answers — and tests
//! can supply their own.

use std::io;

/// What the system calls report, gathered once so the findings can be built from them
/// (and tests can supply their own).
#[derive(Debug, Clone)]
pub struct Probed {
    /// `uname -r`.
    pub release: String,
    /// `uname -v`.
    pub version: String,
    /// The calling thread's timer slack (`prctl(PR_GET_TIMERSLACK)`), or the error.
    pub timer_slack: Result<u64, String>,
    /// The CPUID hypervisor vendor signature (leaf 0x40000000), when the hypervisor bit
    /// is set; `Err` when CPUID does not exist here or the bit is clear.
    pub cpuid_vendor: Result<String, String>,
    /// Trying SCHED_FIFO, SCHED_DEADLINE and nice -5 on a scratch thread.
    pub tries: PolicyTries,
}

/// The outcome of trying each privileged setting on a scratch thread that then exits.
#[derive(Debug, Clone)]
pub struct PolicyTries {
    /// `sched_setscheduler(SCHED_FIFO, 1)`.
    pub fifo: Result<(), String>,
    /// `sched_setattr(SCHED_DEADLINE, 1 ms every 10 ms)`.
    pub deadline: Result<(), String>,
    /// `setpriority(-5)`.
    pub nice: Result<(), String>,
}

impl Probed {
    /// Asks this machine.
    pub fn system() -> Probed {
        let uts = crate::sys::uname();
        Probed {
            release: uts.2,
            version: uts.3,
            timer_slack: timer_slack(),
            cpuid_vendor: cpuid_hypervisor(),
            tries: try_policies(),
        }
    }
}

fn timer_slack() -> Result<u64, String> {
    // SAFETY: PR_GET_TIMERSLACK takes no pointers and returns the value.
    let r = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    if r < 0 {
        Err(format!("prctl(PR_GET_TIMERSLACK): {}", io::Error::last_os_error()))
    } else {
        Ok(r as u64)
    }
}

#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor() -> Result<String, String> {
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 1 is always valid.
    #[allow(unused_unsafe)]
    let leaf1 = unsafe { __cpuid(1) };
    if leaf1.ecx & (1 << 31) == 0 {
        return Err("CPUID leaf 1 ECX bit 31 (hypervisor) clear".into());
    }
    // SAFETY: with the hypervisor bit set, leaf 0x40000000 is the hypervisor's vendor leaf.
    #[allow(unused_unsafe)]
    let l = unsafe { __cpuid(0x4000_0000) };
    let mut sig = Vec::with_capacity(12);
    for r in [l.ebx, l.ecx, l.edx] {
        sig.extend_from_slice(&r.to_le_bytes());
    }
    Ok(String::from_utf8_lossy(&sig).trim_matches(char::from(0)).trim().to_string())
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hypervisor() -> Result<String, String> {
    Err("no CPUID on this architecture".into())
}

/// The hypervisor a CPUID vendor signature names.
pub fn hypervisor_name(sig: &str) -> Option<&'static str> {
    Some(match sig {
        "KVMKVMKVM" => "KVM",
        "Microsoft Hv" => "Hyper-V",
        "VMwareVMware" => "VMware",
        "XenVMMXenVMM" => "Xen",
        "TCGTCGTCGTCG" => "QEMU (TCG)",
        "ACRNACRNACRN" => "ACRN",
        "bhyve bhyve" => "bhyve",
        "VBoxVBoxVBox" => "VirtualBox",
        "QNXQVMBSQG" => "QNX",
        "Linux KVM Hv" => "KVM (Hyper-V enlightenments)",
        _ => return None,
    })
}

/// Tries each privileged setting on its own scratch thread, which exits right after, so
/// nothing changes for the caller.
fn try_policies() -> PolicyTries {
    let on_thread = |f: fn() -> Result<(), String>| {
        std::thread::spawn(f).join().unwrap_or_else(|_| Err("the scratch thread panicked".into()))
    };
    PolicyTries {
        fifo: on_thread(|| {
            crate::sys::set_policy(libc::SCHED_FIFO, 1)
                .map_err(|e| format!("sched_setscheduler(SCHED_FIFO): {e}"))
        }),
        deadline: on_thread(|| {
            let ms = std::time::Duration::from_millis;
            crate::sys::set_deadline(ms(1), ms(10), ms(10))
                .map_err(|e| format!("sched_setattr(SCHED_DEADLINE): {e}"))
        }),
        nice: on_thread(|| crate::sys::set_nice(-5).map_err(|e| format!("setpriority(-5): {e}"))),
    }
}
