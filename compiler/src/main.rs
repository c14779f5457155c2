//! `dcc`: check native-clock contracts and compile them to Rust.
//!
//! Exit codes: 0 clean, 1 errors in a spec, 2 usage or I/O error.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use dcc_compiler::{LoadError, load_file, report};

#[derive(Parser)]
#[command(
    name = "dcc",
    version,
    about = "Compiler for native-clock contracts of streaming speech models",
    long_about = "Compiler for native-clock contracts of streaming speech models.\n\n\
A contract (YAML) declares a model's clocks, quantities, state regions, device-resident \
constants and hot callables. `dcc check` derives every extent, byte count, over-reservation \
ratio, shape catalog and capture verdict from it; `dcc compile` turns it into a Rust module of \
constants, region layouts, the session arena and the table of graph signatures.",
    after_help = "Examples:\n  \
dcc check specs/token2wav.yaml                 report with every derivation and its inputs\n  \
dcc check specs/*.yaml --format json           one JSON object per spec, one per line\n  \
dcc compile specs/token2wav.yaml -o src/t2w.rs generate the Rust module\n  \
dcc graph specs/token2wav.yaml | dot -Tsvg     region/callable/clock graph\n\n\
Exit codes: 0 clean, 1 errors in a spec (printed with file:line:column), 2 usage or I/O error."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Copy, Clone, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check specs and report every derived quantity and verdict.
    ///
    /// Prints, per spec: quantities, clocks, device constants, and for the base operating point
    /// and each declared operating point the regions (attended and envelope extents, live and
    /// reserved bytes, ρ, catalog width K_r) and callables (catalog 𝓛, K, classes, verdict,
    /// M_reserve at step and chunk granularity), each derived number with its formula and inputs.
    /// Every error in a spec is reported (several per run where possible), then exit code 1.
    Check {
        /// Spec files (YAML).
        #[arg(required = true)]
        specs: Vec<PathBuf>,
        /// Output format: a readable report, or one JSON object per spec (one per line).
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Generate the Rust module of a spec (`@generated`, deterministic byte for byte).
    ///
    /// The module holds a constant per quantity (with its derivation), a layout type per region,
    /// the session arena layout, the static catalog of graph signatures per callable, the
    /// admission predicates as `const fn`, the verdicts and the spec's SHA-256 fingerprint. It
    /// depends only on `dcc-runtime`. The file is written only when its content changes.
    Compile {
        /// Spec file (YAML).
        spec: PathBuf,
        /// Output file; `-` or absent writes to stdout.
        #[arg(short = 'o', long = "out")]
        out: Option<PathBuf>,
    },
    /// Print the region/callable/clock graph of a spec as Graphviz DOT.
    Graph {
        /// Spec file (YAML).
        spec: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut code = 0u8;
    match cli.cmd {
        Cmd::Check { specs, format } => {
            for (i, p) in specs.iter().enumerate() {
                match load_file(p) {
                    Ok(c) => {
                        let s = match format {
                            Format::Text => {
                                let mut t = report::text(&c);
                                if i + 1 < specs.len() {
                                    t.push('\n');
                                }
                                t
                            }
                            Format::Json => format!("{}\n", report::json(&c)),
                        };
                        if out.write_all(s.as_bytes()).is_err() {
                            return ExitCode::from(2);
                        }
                    }
                    Err(LoadError::Spec(d)) => {
                        eprint!("{}", d.render());
                        if format == Format::Json {
                            let _ = writeln!(out, "{}", report::json_errors(&d));
                        }
                        code = code.max(1);
                    }
                    Err(e @ LoadError::Io { .. }) => {
                        eprintln!("{e}");
                        code = 2;
                    }
                }
            }
        }
        Cmd::Compile {
            spec,
            out: out_path,
        } => match load_file(&spec) {
            Ok(c) => match dcc_compiler::generate(&c) {
                Ok(files) => {
                    let text: String = files.into_values().collect();
                    let written = match out_path.as_deref() {
                        Some(p) if p != std::path::Path::new("-") => {
                            dcc_compiler::back::write_if_changed(p, &text).map(|_| ())
                        }
                        _ => out.write_all(text.as_bytes()).map_err(|error| {
                            dcc_compiler::CompileError::Io {
                                path: "<stdout>".into(),
                                error,
                            }
                        }),
                    };
                    if let Err(e) = written {
                        eprintln!("error: {e}");
                        code = 2;
                    }
                }
                Err(e) => {
                    eprintln!("error: {}: {e}", spec.display());
                    code = 1;
                }
            },
            Err(e) => code = load_failed(e),
        },
        Cmd::Graph { spec } => match load_file(&spec) {
            Ok(c) => {
                if out
                    .write_all(dcc_compiler::graph::dot(&c).as_bytes())
                    .is_err()
                {
                    return ExitCode::from(2);
                }
            }
            Err(e) => code = load_failed(e),
        },
    }
    ExitCode::from(code)
}

/// Prints why `dcc compile`/`dcc graph` could not load its spec; the exit code: 1 for spec
/// errors, 2 for I/O.
fn load_failed(e: LoadError) -> u8 {
    match e {
        LoadError::Spec(d) => {
            eprint!("{}", d.render());
            1
        }
        e @ LoadError::Io { .. } => {
            eprintln!("{e}");
            2
        }
    }
}
