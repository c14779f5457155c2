//! `dcc`: check native-clock contracts and compile them to Rust.
//!
//! Exit codes: 0 clean, 1 errors in a spec, 2 usage or I/O error (including a closed or full
//! stdout: nothing is printed half-way and reported as success).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use dcc_compiler::back::{check_output_target, write_if_changed};
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
        /// Output format: a readable report, or one JSON object per spec (one per line, in order;
        /// a spec that failed has an object with its `file` and its `diagnostics`).
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Generate the Rust module of a spec (`@generated`, deterministic byte for byte).
    ///
    /// The module holds a constant per quantity (with its derivation), a layout type per region,
    /// the session arena layout, the static catalog of graph signatures per callable, the
    /// admission predicates as `const fn`, the verdicts and the spec's SHA-256 fingerprint. It
    /// depends only on `dcc-runtime`. The file is written only when its content changes, and
    /// then atomically (a temporary file next to it, renamed over it). An output that is the spec
    /// itself (also through a link), a directory or a non-regular file is refused (exit 2).
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
    let code = match run(cli.cmd, &mut out).and_then(|code| out.flush().map(|_| code)) {
        Ok(code) => code,
        // stdout is closed or full: what was asked for was not delivered. Say so if stderr
        // still works, and exit 2 (Rust ignores SIGPIPE, so a closed pipe arrives here as
        // `BrokenPipe` instead of killing the process).
        Err(e) => {
            err_line(&format!("error: cannot write to stdout: {e}"));
            2
        }
    };
    ExitCode::from(code)
}

/// Writes one line to stderr. A closed or full stderr is ignored: there is nowhere left to say
/// anything, and the exit code still tells the outcome (`eprintln!` would panic instead).
fn err_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = err.write_all(b"\n");
    }
}

/// Runs a command; the exit code, or the error writing to stdout.
fn run(cmd: Cmd, out: &mut impl Write) -> std::io::Result<u8> {
    let mut code = 0u8;
    match cmd {
        Cmd::Check { specs, format } => {
            for (i, p) in specs.iter().enumerate() {
                match load_file(p) {
                    Ok(c) => match format {
                        Format::Text => {
                            out.write_all(report::text(&c).as_bytes())?;
                            if i + 1 < specs.len() {
                                out.write_all(b"\n")?;
                            }
                        }
                        Format::Json => writeln!(out, "{}", report::json(&c))?,
                    },
                    Err(LoadError::Spec(d)) => {
                        err_line(&d.render());
                        if format == Format::Json {
                            writeln!(out, "{}", report::json_errors(&d))?;
                        }
                        code = code.max(1);
                    }
                    Err(e @ LoadError::Io { .. }) => {
                        err_line(&e.to_string());
                        if format == Format::Json {
                            let message = match &e {
                                LoadError::Io { error, .. } => error.to_string(),
                                LoadError::Spec(_) => e.to_string(),
                            };
                            writeln!(out, "{}", report::json_io_error(p, &message))?;
                        }
                        code = 2;
                    }
                }
            }
        }
        Cmd::Compile {
            spec,
            out: out_path,
        } => {
            // The output is checked before the spec is read: `-o` naming the spec itself (or a
            // directory, a device, a FIFO) must not get as far as a write.
            let target = out_path.filter(|p| p.as_path() != Path::new("-"));
            if let Some(t) = &target
                && let Err(e) = check_output_target(t, &[&spec])
            {
                err_line(&format!("error: {e}"));
                return Ok(2);
            }
            match load_file(&spec) {
                Ok(c) => match dcc_compiler::generate(&c) {
                    Ok(files) => {
                        let text: String = files.into_values().collect();
                        match &target {
                            Some(p) => {
                                if let Err(e) = write_if_changed(p, &text) {
                                    err_line(&format!("error: {e}"));
                                    code = 2;
                                }
                            }
                            None => out.write_all(text.as_bytes())?,
                        }
                    }
                    Err(e) => {
                        err_line(&format!("error: {}: {e}", spec.display()));
                        code = 1;
                    }
                },
                Err(e) => code = load_failed(e),
            }
        }
        Cmd::Graph { spec } => match load_file(&spec) {
            Ok(c) => out.write_all(dcc_compiler::graph::dot(&c).as_bytes())?,
            Err(e) => code = load_failed(e),
        },
    }
    Ok(code)
}

/// Prints why `dcc compile`/`dcc graph` could not load its spec; the exit code: 1 for spec
/// errors, 2 for I/O.
fn load_failed(e: LoadError) -> u8 {
    match e {
        LoadError::Spec(d) => {
            err_line(&d.render());
            1
        }
        e @ LoadError::Io { .. } => {
            err_line(&e.to_string());
            2
        }
    }
}
