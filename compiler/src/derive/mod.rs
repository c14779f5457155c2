//! Derivations (paper eqs. 1–7): quantities, clock rates, attended and envelope
//! extents, bytes, ρ (eq. 3), catalogs 𝓛 (eq. 4) and widths K_r (eq. 7), verdicts, M_reserve
//! (eq. 6) at step and chunk granularity and the host-launch ratio (eq. 5).
//!
//! Runs after [`crate::validate`], so every name resolves and definitions are acyclic; what can
//! still fail is arithmetic (overflow, division by zero) and value constraints (zero strides,
//! retention larger than the envelope...), reported as diagnostics.
//!
//! One file per stage: [`quantities`] (values at an operating point, clock rates), [`region`]
//! (extents along each region's [`trajectory`], bytes, ρ, K_r; kept slices in [`keep`]),
//! [`points`] (regions disabled and dtypes changed by an operating point), [`callable`] (𝓛,
//! widths, the reachable walk of [`reach`], the verdict), [`classes`] (the signature classes
//! over query phases, extent tuples and specialised steps, and M_reserve over exactly those),
//! [`flush`] (the partial-flush bound), [`arena`] (the session arena), [`batch`] (the batched
//! catalog: classes × batch sizes, rows, bytes per batch slot) and [`soundness`] (staged
//! writes).

pub mod arena;
mod batch;
mod callable;
mod classes;
mod flush;
mod keep;
mod points;
mod quantities;
pub mod reach;
mod region;
pub mod soundness;
pub mod trajectory;
pub mod types;

use std::collections::HashMap;

use crate::diag::{Code, Diagnostic};
use crate::expr::{self, Env};
use crate::ir::*;
use types::*;

/// Why a catalog with query phases has fewer classes than |Q_o| × ∏K_r (report and verdict
/// say it the same way).
pub const PHASES_TEXT: &str = "`first` is presented only at the first call's extents, `steady` and `flush` at the later ones, and equal signatures count once";

/// Default largest catalog accepted as capturable (`capture_limit:` overrides it).
pub const DEFAULT_CAPTURE_LIMIT: u64 = 64;
/// Most classes enumerated per callable when summing M_reserve.
pub const MAX_ENUMERATED_CLASSES: u64 = 100_000;
/// Most attended extents listed per region catalog.
pub const MAX_LISTED_EXTENTS: u64 = 100_000;

/// Derive the base operating point and every declared operating point.
pub fn derive_all(spec: &Spec) -> Result<(Derived, Vec<Derived>), Vec<Diagnostic>> {
    let base = derive_at(spec, None)?;
    let mut ops = Vec::new();
    let mut errs = Vec::new();
    for op in &spec.operating_points {
        match derive_at(spec, Some(op)) {
            Ok(d) => ops.push(d),
            Err(e) => errs.extend(e),
        }
    }
    if errs.is_empty() {
        Ok((base, ops))
    } else {
        Err(errs)
    }
}

/// Derive at one operating point (`None` = base).
pub fn derive_at(spec: &Spec, op: Option<&OperatingPoint>) -> Result<Derived, Vec<Diagnostic>> {
    let mut d = Deriver {
        spec,
        op,
        env: HashMap::new(),
        order: Vec::new(),
        phases: HashMap::new(),
        diags: Vec::new(),
    };
    let out = d.run();
    match out {
        Some(v) if d.diags.is_empty() => Ok(v),
        _ => {
            if d.diags.is_empty() {
                d.diags.push(Diagnostic::error(
                    Code::Inconsistent,
                    spec.family.span,
                    "spec could not be derived",
                ));
            }
            Err(d.diags)
        }
    }
}

/// Warnings about derived numbers.
pub fn warnings(spec: &Spec, derived: &Derived) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (r, dr) in spec.regions.iter().zip(&derived.regions) {
        for (s, ds) in r.stock.iter().zip(&dr.stock) {
            if ds.rho.num < ds.rho.den {
                out.push(
                    Diagnostic::warning(
                        Code::Suspicious,
                        s.span,
                        format!(
                            "stock constant `{}` of region `{}` reserves less than the declared live extent (ρ = {:.2})",
                            s.name.value,
                            r.name.value,
                            ds.rho.as_f64()
                        ),
                    )
                    .label("smaller than the envelope")
                    .help("check the stock constant and the retention policy: the stock implementation would have truncated earlier than the contract says"),
                );
            }
        }
    }
    for (r, dr) in spec.regions.iter().zip(&derived.regions) {
        if dr.width.unbounded && r.envelope.is_none() {
            out.push(
                Diagnostic::warning(
                    Code::Suspicious,
                    r.retention.span,
                    format!(
                        "region `{}` grows for the whole session, but nothing sizes its storage beyond the first call ({} along its growing axis)",
                        r.name.value, dr.attended_extent.value
                    ),
                )
                .label("`retention: none` without `envelope:`")
                .help("declare `envelope:` with the longest session the storage must hold, or bound the region with a retention policy"),
            );
        }
    }
    for (c, dc) in spec.callables.iter().zip(&derived.callables) {
        let varying = dc.region_widths.iter().any(|w| !w.pinned);
        if varying && c.admit.is_none() {
            out.push(
                Diagnostic::warning(
                    Code::Suspicious,
                    c.name.span,
                    format!(
                        "callable `{}` has a varying extent but no admission predicate",
                        c.name.value
                    ),
                )
                .label("partial flushes are only bounded by the stride")
                .help("declare `admit: f <= STRIDE` so partial flushes at turn ends stay in a finite catalog"),
            );
        }
    }
    out
}

struct Deriver<'s> {
    spec: &'s Spec,
    op: Option<&'s OperatingPoint>,
    env: HashMap<String, i64>,
    /// The effective quantity definitions in evaluation order (phases re-evaluate from it).
    order: Vec<(&'s Ident, &'s Expr)>,
    /// Each callable's query phases (classes.rs), by callable name.
    phases: HashMap<String, Vec<classes::PhaseEnv>>,
    diags: Vec<Diagnostic>,
}

struct ClassEnv<'a> {
    env: &'a HashMap<String, i64>,
    extents: &'a [(String, u64)],
}

impl Env for ClassEnv<'_> {
    fn name(&self, name: &str) -> Option<i64> {
        self.env.get(name).copied()
    }
    fn extent(&self, region: &str) -> Option<i64> {
        self.extents
            .iter()
            .find(|(r, _)| r == region)
            .and_then(|(_, v)| i64::try_from(*v).ok())
    }
}

fn mul_all(vals: impl IntoIterator<Item = u64>) -> Option<u64> {
    vals.into_iter().try_fold(1u64, |a, b| a.checked_mul(b))
}

impl<'s> Deriver<'s> {
    fn at(&self) -> String {
        match self.op {
            Some(op) => format!(" (at operating point `{}`)", op.name.value),
            None => String::new(),
        }
    }

    fn push(&mut self, mut d: Diagnostic) {
        d.message.push_str(&self.at());
        if self.diags.len() < 1000 && !self.diags.contains(&d) {
            self.diags.push(d);
        }
    }

    fn overflow(&mut self, span: Span, what: &str) {
        self.push(
            Diagnostic::error(Code::Arithmetic, span, format!("{what} overflows 64 bits"))
                .label("too large")
                .help("check the magnitudes of the extents and shapes involved"),
        );
    }

    fn eval(&mut self, e: &Expr) -> Option<i64> {
        match expr::eval(e, &|n: &str| self.env.get(n).copied()) {
            Ok(v) => Some(v),
            Err(err) => {
                self.push(err.to_diagnostic());
                None
            }
        }
    }

    /// Evaluate and require `>= min` (1 for sizes and strides, 0 for offsets).
    fn eval_at_least(&mut self, e: &Expr, min: i64, what: &str) -> Option<u64> {
        let v = self.eval(e)?;
        if v < min {
            let kind = if min >= 1 { "positive" } else { "non-negative" };
            self.push(
                Diagnostic::error(
                    Code::NotPositive,
                    e.span,
                    format!("{what} must be {kind}, but `{e}` = {v}"),
                )
                .label(format!("evaluates to {v}"))
                .help(if min >= 1 {
                    format!("{what} must be at least 1; check the quantities it uses")
                } else {
                    format!("{what} cannot be negative; check the quantities it uses")
                }),
            );
            return None;
        }
        u64::try_from(v).ok()
    }

    /// A derivation of `value` from a formula over expressions (names annotated with values).
    fn derivation(&self, value: u64, formula: String, exprs: &[&Expr]) -> Derivation {
        let mut inputs: Vec<(String, i64)> = Vec::new();
        for e in exprs {
            for (n, _) in e.names() {
                if !inputs.iter().any(|(m, _)| m == n)
                    && let Some(v) = self.env.get(n)
                {
                    inputs.push((n.to_string(), *v));
                }
            }
        }
        Derivation {
            value,
            formula,
            inputs,
        }
    }

    fn run(&mut self) -> Option<Derived> {
        self.check_point();
        let quantities = self.quantities()?;
        let clocks = self.clocks();
        // Every callable's query phases first: a fixed extent a phase overrides sizes the
        // regions the callable touches (region.rs) and its views (classes.rs).
        let mut ok = clocks.is_some();
        for c in &self.spec.callables {
            match self.phase_envs(c) {
                Some(p) => {
                    self.phases.insert(c.name.value.clone(), p);
                }
                None => ok = false,
            }
        }
        let mut regions = Vec::new();
        for r in &self.spec.regions {
            match self.region(r) {
                Some(d) => regions.push(d),
                None => ok = false,
            }
        }
        let mut constants = Vec::new();
        for c in &self.spec.constants {
            match self.constant(c) {
                Some(d) => constants.push(d),
                None => ok = false,
            }
        }
        let limit = match &self.spec.capture_limit {
            Some(e) => self.eval_at_least(&e.value, 1, "the capture limit"),
            None => Some(DEFAULT_CAPTURE_LIMIT),
        };
        if !ok {
            return None;
        }
        let limit = limit?;
        let mut callables = Vec::new();
        for c in &self.spec.callables {
            match self.callable(c, &regions, &constants, clocks.as_deref()?, limit) {
                Some(d) => callables.push(d),
                None => ok = false,
            }
        }
        if !ok {
            if self.diags.is_empty() {
                self.push(
                    Diagnostic::error(
                        Code::Arithmetic,
                        self.spec.family.span,
                        "byte counts overflow 64 bits",
                    )
                    .help("check the magnitudes of the shapes and extents"),
                );
            }
            return None;
        }
        let Some(arena) = arena::layout(&regions) else {
            self.push(
                Diagnostic::error(
                    Code::Arithmetic,
                    self.spec.family.span,
                    "the session arena's bytes overflow 64 bits",
                )
                .help("check the magnitudes of the arena regions' shapes and extents"),
            );
            return None;
        };
        let unsound: Vec<Diagnostic> = self
            .spec
            .callables
            .iter()
            .flat_map(|c| soundness::staged_writes(c, &regions, &arena))
            .collect();
        if !unsound.is_empty() {
            unsound.into_iter().for_each(|d| self.push(d));
            return None;
        }
        let batching = self.batching(&mut callables, &regions, &arena, limit)?;
        let stock_bytes = regions
            .iter()
            .filter_map(|r| r.reserved_bytes())
            .try_fold(0u64, |a, b| a.checked_add(b))?;
        let overrides = self
            .op
            .map(|op| {
                op.overrides
                    .iter()
                    .map(|o| {
                        (
                            o.name.value.clone(),
                            self.env.get(&o.name.value).copied().unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Derived {
            operating_point: self
                .op
                .map(|o| o.name.value.clone())
                .unwrap_or_else(|| "base".into()),
            overrides,
            quantities,
            clocks: clocks?,
            regions,
            constants,
            callables,
            arena,
            stock_bytes,
            capture_limit: limit,
            batching,
        })
    }
}

/// β: bytes per element, as the exact `u64` arithmetic of the derivations uses it.
fn beta(d: DType) -> u64 {
    // Lossless: an element is at most 8 bytes.
    d.size() as u64
}

fn paren(e: &Expr) -> String {
    match e.kind {
        ExprKind::Binary(..) => format!("({e})"),
        _ => e.to_string(),
    }
}

fn paren_str(s: &str) -> String {
    if s.contains(' ') && !(s.starts_with('(') && s.ends_with(')')) {
        format!("({s})")
    } else {
        s.to_string()
    }
}

/// `tokens` / `token`: the unit of `n` ticks of `clock`.
fn unit_word(n: u64, clock: &str) -> String {
    if n == 1 || clock.ends_with('s') {
        clock.to_string()
    } else {
        format!("{clock}s")
    }
}

/// `conformer_cache and upsample_cache advance together on the token clock` (public: the
/// report and the generated docs say it the same way).
pub fn lockstep_text(groups: &[reach::LockstepGroup]) -> String {
    groups
        .iter()
        .map(|g| {
            let list = match g.regions.split_last() {
                Some((last, rest)) if !rest.is_empty() => {
                    format!("{} and {last}", rest.join(", "))
                }
                _ => g.regions.join(""),
            };
            format!("{list} advance together on the {} clock", g.base)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn merge_inputs(a: &Derivation, b: &Derivation) -> Vec<(String, i64)> {
    let mut out = a.inputs.clone();
    for i in &b.inputs {
        if !out.iter().any(|(n, _)| n == &i.0) {
            out.push(i.clone());
        }
    }
    out
}
