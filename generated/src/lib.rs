//! dcc-generated: committed output of `dcc compile` for every bundled spec.
