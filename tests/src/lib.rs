//! dcc-tests: end-to-end tests live in tests/tests/.
