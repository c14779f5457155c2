//! Human-readable and JSON reports of a [`crate::Checked`] spec. (In progress.)
