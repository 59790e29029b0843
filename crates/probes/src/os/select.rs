//! (being written)

use crate::Probe;

/// The probes of this family, in catalog order.
pub fn probes() -> Vec<Box<dyn Probe>> {
    Vec::new()
}
