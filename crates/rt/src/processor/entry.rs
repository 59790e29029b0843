//! Where a user thread starts and how it ends: the trampoline's entry, the body
//! with its completion, and the last switch that recycles the stack.

use super::switch::{after_switch, make_runnable_on, Pending};
use super::{HereRaw, Processor};
use crate::arch;
use crate::event::Event;
use crate::stack::Stack;
use crate::task::{Joiner, Task, TaskRef, ThreadId};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// Where every user thread starts (on its own stack, via the trampoline).
pub(super) unsafe extern "C" fn task_entry(passed: *mut u8, _arg: *mut u8) -> ! {
    // Who we are, read while the switch's section is still open: ending it
    // (`after_switch`) may take a deferred preemption, after which `passed`
    // is stale (we may resume on another processor).
    // SAFETY: `passed` is the processor that switched to us.
    let task = unsafe { &*passed.cast_const().cast::<Processor>() }
        .current_task_ptr()
        .expect("task_entry runs a user thread");
    // SAFETY: as above.
    unsafe { after_switch(passed) };
    let (vp, stack, id) = run_body(task);
    if vp.is_null() {
        crate::hooks::exit_detached(stack);
    }
    // SAFETY: `run_body` returns the processor it completed on, in a raised
    // section, and nothing switches in between.
    exit_current(unsafe { &*vp }, stack, id)
}

/// Runs the current thread's closure and its user-thread-local destructors,
/// then completes it (`lifecycle.rs`): hands the result to its joiner and
/// drops the running reference, freeing the task if that was the last.
/// Returns the thread's stack, which it still runs on, for the exit switch.
/// May switch any number of times before the completion, never after.
#[inline(never)]
#[link_section = "schedlab_rt_np"]
fn run_body(task: NonNull<Task>) -> (*const Processor, Stack, ThreadId) {
    {
        // SAFETY: the running thread is kept alive by the `current` slot of
        // whichever processor runs it, until it completes below.
        let task = unsafe { task.as_ref() };
        task.run_body();
        crate::hooks::destroy_locals(task);
    }
    // The exit is one runtime section up to the last switch, whose resumed
    // context ends it.
    // The running reference: `complete` drops it. From here the exit never
    // touches the task again, except as `complete` allows.
    let (vp, running) = match super::here_raw() {
        // SAFETY: only this kernel thread touches `current`.
        HereRaw::Processor(vp) => (Some(vp), vp.take_current().expect("exit on a user thread")),
        HereRaw::Detached(m) => (None, crate::hooks::take_detached(m)),
        HereRaw::Os => unreachable!("exit outside a user thread"),
    };
    // The thread's own TLS block (`shared-library` build) is done with: the
    // rest of the exit runs on the kernel thread's, inside the section (so
    // on this kernel thread, whose scheduler context is suspended and does
    // not use it meanwhile), and the joiner may free the block as soon as
    // `complete` wakes it.
    #[cfg(feature = "shared-library")]
    {
        let tp = crate::machine::Machine::here().native_tp.load(Ordering::Relaxed);
        // SAFETY: the kernel thread's own thread pointer, which only its
        // suspended scheduler context uses otherwise.
        unsafe { crate::arch::set_thread_pointer(tp) };
    }
    debug_assert_eq!(running.as_ptr(), task);
    let raw = running.into_raw();
    // SAFETY: alive until `complete` below.
    let t = unsafe { raw.as_ref() };
    let id = t.id;
    // SAFETY: only the task itself and its exit touch its stack.
    let stack = unsafe { (*t.stack.get()).take() }.expect("a running thread owns its stack");
    stack.set_owner(std::ptr::null());
    let c = t.state.complete();
    if c.joiner_waits {
        // SAFETY: the joiner wrote `joiner` before registering, which we saw
        // with acquire; it holds the handle, so the task is alive here.
        match unsafe { *t.joiner.get() } {
            // SAFETY: registered and not yet woken; woken only here.
            Joiner::Waiter(w) => unsafe { w.wake() },
            Joiner::Task(j) => {
                // SAFETY: the state word owned this reference to the parked
                // joiner (task.rs); it is ours now.
                let j = unsafe { TaskRef::from_raw(j) };
                j.parked_in_queue.store(false, Ordering::Relaxed);
                make_runnable_on(vp, j);
            }
            Joiner::None => unreachable!("a waiting joiner with no joiner registered"),
        }
    } else if c.last {
        // SAFETY: the last reference (the handle is gone); the task's stack
        // is out of it, so freeing it leaves the stack we run on alone.
        unsafe { Task::free(raw) };
    }
    (vp.map_or(std::ptr::null(), |vp| vp as *const Processor), stack, id)
}

/// The last switch of a user thread, which has completed (`run_body`) and
/// hands its stack to the next context for recycling.
fn exit_current(vp: &Processor, stack: Stack, id: ThreadId) -> ! {
    vp.emit(|| Event::Exited { thread: id, processor: vp.index });
    let load = match vp.next_local() {
        Some(n) => {
            // `n` came out of a run queue: saved and published, or not
            // started (it then takes a stack from the pool before the one we
            // run on goes back there, below).
            let sp = vp.context_of(&n);
            vp.emit(|| Event::Switched { from: Some(id), to: Some(n.id), processor: vp.index });
            // SAFETY: only this kernel thread touches `current` (empty now).
            unsafe { *vp.current.get() = Some(n) };
            sp
        }
        None => {
            vp.emit(|| Event::Switched { from: Some(id), to: None, processor: vp.index });
            vp.in_user.store(false, Ordering::Relaxed);
            // SAFETY: the scheduler context is suspended while a user thread
            // runs on this processor.
            unsafe { *vp.machine().sched_ctx.get() }
        }
    };
    // The stack we still run on goes back to this processor's pool now if
    // it can stay there: only this kernel thread takes stacks from the pool,
    // and it does so only after the switch below. Otherwise (it would spill
    // to the shared depot, or be unmapped) the next context recycles it.
    // SAFETY: the pool is touched only by this kernel thread, not re-entrantly.
    if let Err(stack) = unsafe { (*vp.pool.get()).put_local(stack) } {
        // SAFETY: only this kernel thread touches `pending`; it is empty.
        unsafe { std::ptr::write(vp.pending.get(), Pending::Exit(stack)) };
    }
    vp.count_switch();
    // SAFETY: `load` is a saved context nobody else resumes; our own context
    // is never resumed, so it is saved into the processor's scratch slot.
    unsafe { arch::switch(vp.exit_ctx.get(), load, vp.as_pass()) };
    unreachable!("an exited user thread was resumed")
}
