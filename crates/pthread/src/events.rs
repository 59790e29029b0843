//! The runtime's scheduling events, recorded for `schedlab exec --trace`.

/// The hook to give the runtime, when `SCHEDLAB_RT_EVENTS` names a file.
pub(crate) fn hook() -> Option<fn(&schedlab_rt::Event)> {
    None
}
