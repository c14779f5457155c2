//! dcc-macros: thin proc-macro shim over dcc-compiler.
