//! schedlab-rt: being written (issue 3).
