//! dcc-compiler: front (YAML) -> IR -> validate -> derive -> back.
