//! Typed intermediate representation of a native-clock contract (paper §3, Definition 1).
//!
//! The IR is what `front` produces from YAML and what `validate`, `derive` and code generation
//! consume. It knows nothing about YAML: every node carries a [`Span`] (byte range into the spec
//! file) so later passes can point at the text that declared it. Names are kept in declaration
//! order (`Vec`, not maps) so everything downstream is deterministic.
//!
//! The vocabulary (DType, Lifetime, Mutability, Placement, CacheOrder, Verdict, Granularity,
//! Effects) is `dcc-vocab`'s, re-exported here: the runtime re-exports the same types from
//! `dcc_runtime::contract`, so the two cannot drift apart, and the compiler still never depends
//! on the runtime.

/// Byte range `[start, end)` into the spec file.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    /// A span from `start` to `end` (bytes).
    pub const fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// A value together with the span of the YAML node (or sub-expression) it came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }
}

/// A declared name (clock, quantity, region, constant, callable, argument).
pub type Ident = Spanned<String>;

mod expr;
mod lang;

pub use expr::*;
pub use lang::*;

// ---------------------------------------------------------------------------------------------
// Vocabulary: shared with the runtime (dcc-vocab), plus what only the compiler needs
// ---------------------------------------------------------------------------------------------

pub use dcc_vocab::{
    CacheOrder, DType, Effects, Granularity, Lifetime, Mutability, Placement, Verdict,
};

/// Which rule a prompt + history retention's kept slices follow on its storage order.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeepRule {
    /// The storage order's own rule (the default).
    Natural,
    /// The other order's rule applied to this storage (minicpmo-utils 1.0.7 on its
    /// prepend-ordered estimator cache).
    Swapped,
    /// Head and tail counts that are neither (`head + tail` still equals the attended extent).
    Split,
}

impl KeepRule {
    pub const fn name(self) -> &'static str {
        match self {
            KeepRule::Natural => "natural",
            KeepRule::Swapped => "swapped",
            KeepRule::Split => "split",
        }
    }
}

/// One dim of a region's storage order (`layout:`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LayoutDim {
    /// Clock axis `i` (expanded clock order).
    Axis(usize),
    /// Shape entry `j`.
    Shape(usize),
}

/// Why a `layout:` does not describe the region's dims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// Entry `index` names clock axis `axis` a second time (first at `first`).
    AxisTwice { index: usize, first: usize },
    /// Entry `index` should be shape entry `expected` (shape entries keep their `shape:` order).
    ShapeMismatch { index: usize, expected: usize },
    /// Entry `index` is neither a clock axis nor a remaining shape entry (all are listed).
    Extra { index: usize },
    /// Clock axis `axis` is not listed.
    MissingAxis { axis: usize },
    /// Shape entries from `from` on are not listed.
    MissingShape { from: usize },
}

/// Resolves a `layout:` against a region's (expanded) clock axes and shape: every clock axis
/// once, by name, and every shape entry once, as written and in `shape:` order. Returns the
/// storage order, outermost first, or every problem found.
pub fn resolve_layout(
    entries: &[Expr],
    axes: &[&str],
    shape: &[Expr],
) -> Result<Vec<LayoutDim>, Vec<LayoutError>> {
    let mut out = Vec::with_capacity(entries.len());
    let mut errs = Vec::new();
    let mut seen: Vec<Option<usize>> = vec![None; axes.len()];
    let mut next = 0usize;
    for (index, e) in entries.iter().enumerate() {
        if let ExprKind::Name(n) = &e.kind
            && let Some(k) = axes.iter().position(|a| a == n)
        {
            match seen[k] {
                Some(first) => errs.push(LayoutError::AxisTwice { index, first }),
                None => {
                    seen[k] = Some(index);
                    out.push(LayoutDim::Axis(k));
                }
            }
            continue;
        }
        match shape.get(next) {
            None => errs.push(LayoutError::Extra { index }),
            Some(s) if s.to_string() != e.to_string() => {
                errs.push(LayoutError::ShapeMismatch {
                    index,
                    expected: next,
                });
                next += 1;
            }
            Some(_) => {
                out.push(LayoutDim::Shape(next));
                next += 1;
            }
        }
    }
    for (axis, s) in seen.iter().enumerate() {
        if s.is_none() {
            errs.push(LayoutError::MissingAxis { axis });
        }
    }
    if next < shape.len() {
        errs.push(LayoutError::MissingShape { from: next });
    }
    if errs.is_empty() { Ok(out) } else { Err(errs) }
}

/// The default storage order: clock axes, then the shape.
pub fn default_layout(axes: usize, shape: usize) -> Vec<LayoutDim> {
    (0..axes)
        .map(LayoutDim::Axis)
        .chain((0..shape).map(LayoutDim::Shape))
        .collect()
}

/// Whether a callable's query length is fixed by the clocks or depends on traffic.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum QueryLength {
    /// Fixed by the declared clocks (`query: fixed`).
    Fixed,
    /// Depends on how much input arrived (`query: traffic`): 𝒬_o is unbounded.
    Traffic,
}

// ---------------------------------------------------------------------------------------------
// Declarations
// ---------------------------------------------------------------------------------------------

/// A whole contract, as declared in one spec file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Model family (`token2wav`); names the generated module.
    pub family: Ident,
    /// Free-text description.
    pub description: Option<String>,
    pub clocks: Vec<Clock>,
    pub quantities: Vec<Quantity>,
    /// Named overrides of quantities (e.g. `duplex: {n_steps: 5}`), each derived separately.
    pub operating_points: Vec<OperatingPoint>,
    pub regions: Vec<Region>,
    pub constants: Vec<Constant>,
    pub callables: Vec<Callable>,
    /// Largest catalog the spec accepts as capturable (`capture_limit:`; default 64).
    pub capture_limit: Option<Spanned<Expr>>,
}

impl Spec {
    pub fn clock(&self, name: &str) -> Option<&Clock> {
        self.clocks.iter().find(|c| c.name.value == name)
    }
    pub fn quantity(&self, name: &str) -> Option<&Quantity> {
        self.quantities.iter().find(|q| q.name.value == name)
    }
    pub fn region(&self, name: &str) -> Option<&Region> {
        self.regions.iter().find(|r| r.name.value == name)
    }
    /// The callables that write region `name` (`writes:`), in declaration order.
    pub fn writers<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Callable> + 'a {
        self.callables
            .iter()
            .filter(move |c| c.writes.iter().any(|w| w.value == name))
    }
    /// The clock axis a region of lifetime `iteration` holds one slice of: the inner loop
    /// (`loop:`) every callable that writes it declares, where there is at least one writer and
    /// all of them name the same loop (validation reports every other case).
    pub fn iteration_axis<'a>(&'a self, r: &'a Region) -> Option<&'a str> {
        if r.lifetime.value != Lifetime::Iteration {
            return None;
        }
        let mut axis: Option<&str> = None;
        for c in self.writers(&r.name.value) {
            let l = c.loop_clock.as_ref()?.value.as_str();
            if axis.is_some_and(|a| a != l) {
                return None;
            }
            axis = Some(l);
        }
        axis
    }
    pub fn constant(&self, name: &str) -> Option<&Constant> {
        self.constants.iter().find(|c| c.name.value == name)
    }
    pub fn callable(&self, name: &str) -> Option<&Callable> {
        self.callables.iter().find(|c| c.name.value == name)
    }
}

/// A clock: base, derived at a rate from another, or a product of clocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clock {
    pub name: Ident,
    pub kind: ClockKind,
    /// The whole declaration.
    pub span: Span,
}

/// How a clock relates to the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClockKind {
    /// An independent clock (`token: base`).
    Base,
    /// `rate` ticks of this clock per tick of `per` (`frame: 2 per token`).
    Rate { rate: Expr, per: Ident },
    /// A product clock (`solver: [step, frame]`).
    Product(Vec<Ident>),
}

/// A named integer quantity defined by an expression over other quantities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantity {
    pub name: Ident,
    pub expr: Expr,
}

/// A named set of quantity overrides evaluated as its own operating point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatingPoint {
    pub name: Ident,
    pub overrides: Vec<Quantity>,
    /// Regions switched off at this point (`disable: [..]`): extent 0, no bytes.
    pub disable: Vec<Ident>,
    /// Element types changed at this point (`dtype: ..`).
    pub dtype: Option<DTypeChange>,
}

/// Growth map g_r along one axis of a region's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Growth {
    /// The axis has a fixed extent (`step: n_steps`).
    Fixed(Expr),
    /// The axis grows: starts at `from`, advances by `by` per invocation; each call presents
    /// `call` extra frames (lookahead included) that live in the envelope before truncation.
    Grows {
        from: Expr,
        by: Expr,
        call: Option<Expr>,
    },
}

/// Extent declaration for one axis of a region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisGrowth {
    /// Clock that names the axis.
    pub axis: Ident,
    pub growth: Growth,
    /// Advances before the steady `by` (`first:`, `schedule:`); empty for a plain progression.
    pub advances: Advances,
    pub span: Span,
}

/// Retention policy π_r (Definition 1): what bounds the growing axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Retention {
    /// Nothing grows; extents are the fixed axes.
    Pinned,
    /// `retention: none`: nothing bounds the growing axis; the state grows for the whole session
    /// (the paper's C2), so every callable that touches the region is `out: unbounded`.
    Unbounded,
    /// Fixed-capacity ring: the attended extent is pinned at `capacity`.
    Ring { capacity: Expr },
    /// Sliding window of `size` along the growing axis; `steady: true` analyses only the
    /// steady state (the window is full), so the extent is pinned at `size`.
    Window { size: Expr, steady: bool },
    /// Prompt + retained history: keeps `prompt` frames and the newest `retained` frames.
    /// `order` is how the storage holds frames; `keep` is which slices survive, on that storage
    /// (`None` = the order's natural rule, see [`Keep`]).
    PromptHistory {
        prompt: Expr,
        retained: Expr,
        order: CacheOrder,
        keep: Option<Keep>,
    },
}

/// The slices a prompt + history retention keeps on its storage order (paper eq. 2):
/// `H[0:head] ‖ H[ℓ−tail:ℓ]` once the extent ℓ exceeds `head + tail`.
///
/// Default (no `keep:`) is the order's natural rule: `prepend` (newest first, prompt at the
/// tail) keeps `head = retained, tail = prompt`; `append` (oldest first) keeps `head = prompt,
/// tail = retained`. minicpmo-utils 1.0.7 slices its prepend-ordered estimator cache with the
/// append rule: `order: prepend, keep: {head: f_prompt, tail: f_retained}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keep {
    /// Frames kept at the start of the storage order.
    pub head: Expr,
    /// Frames kept at the end of the storage order.
    pub tail: Expr,
    /// The whole `keep:` mapping.
    pub span: Span,
}

impl Retention {
    pub fn kind_name(&self) -> &'static str {
        match self {
            Retention::Pinned => "pinned",
            Retention::Unbounded => "none",
            Retention::Ring { .. } => "ring",
            Retention::Window { .. } => "window",
            Retention::PromptHistory { .. } => "prompt + history",
        }
    }
}

/// A stock implementation constant the region replaces, one extent per clock axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StockConstant {
    /// `stock` for a single unnamed constant, else its name (`largest_bucket`).
    pub name: Ident,
    pub extents: Vec<Expr>,
    pub span: Span,
}

/// A region contract R_r = (c_r, g_r, ℓ_r, μ_r, π_r, p_r) plus dtype, shape and stock constant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub name: Ident,
    pub doc: Option<String>,
    /// Native clock c_r: one axis per clock (scalar clock = one axis).
    pub clock: Vec<Ident>,
    pub clock_span: Span,
    /// Growth map g_r, one entry per clock axis, in clock order.
    pub growth: Vec<AxisGrowth>,
    pub growth_span: Span,
    pub lifetime: Spanned<Lifetime>,
    pub mutability: Spanned<Mutability>,
    pub retention: Spanned<Retention>,
    pub placement: Spanned<Placement>,
    pub dtype: Spanned<DType>,
    /// Per-tick element shape (appended after the clock axes unless `layout` says otherwise).
    pub shape: Vec<Expr>,
    pub shape_span: Span,
    /// Storage order of the dims (`layout:`): every clock axis (by name) and every shape entry
    /// (as written, in `shape:` order), outermost first. `None` = clock axes, then the shape.
    pub layout: Option<Spanned<Vec<Expr>>>,
    /// Optional explicit storage bound along the growing axis.
    pub envelope: Option<Expr>,
    /// Stock constants replaced (first one is the primary for ρ).
    pub stock: Vec<StockConstant>,
    pub span: Span,
}

impl Region {
    /// Index of the growing axis, if any.
    pub fn growing_axis(&self) -> Option<usize> {
        self.growth
            .iter()
            .position(|g| matches!(g.growth, Growth::Grows { .. }))
    }
}

/// A device-resident constant (trivial clock, process lifetime, immutable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Constant {
    pub name: Ident,
    pub doc: Option<String>,
    pub dtype: Spanned<DType>,
    pub shape: Vec<Expr>,
    pub placement: Spanned<Placement>,
    pub span: Span,
}

/// Where a callable's tensor argument comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgSource {
    /// A contract region (contract-owned): shape = region dims at the class's attended extent.
    Region(Ident),
    /// A device-resident constant (contract-owned).
    Constant(Ident),
    /// A caller-provided tensor with an explicit shape.
    Tensor {
        dtype: Spanned<DType>,
        shape: Vec<Expr>,
    },
}

/// One explicit tensor argument of a callable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorArg {
    pub name: Ident,
    pub source: ArgSource,
    /// `alias:` as written; `None` = default (aliased iff contract-owned and device-resident).
    pub alias: Option<Spanned<bool>>,
    /// `view:` on a region input: a window of one axis at an offset that moves with the call.
    pub view: Option<View>,
    pub span: Span,
}

impl TensorArg {
    /// Whether the argument is aliased by a captured graph (passed by address, never staged):
    /// `alias:` as written, else the default, which is true for contract-owned storage (a
    /// region or a constant) off the host. A caller tensor never is: its address is the
    /// caller's, so replay copies it into a static staging buffer. `placement` is the bound
    /// region's or constant's (ignored for a caller tensor).
    pub fn aliased(&self, placement: Placement) -> bool {
        match self.source {
            ArgSource::Tensor { .. } => false,
            ArgSource::Region(_) | ArgSource::Constant(_) => self
                .alias
                .as_ref()
                .map_or(placement != Placement::Host, |a| a.value),
        }
    }
}

/// Comparison in an admission predicate.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Lt,
    Le,
    Eq,
    Ge,
    Gt,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Eq => "==",
            CmpOp::Ge => ">=",
            CmpOp::Gt => ">",
        }
    }
}

/// Admission predicate: a conjunction `var OP expr [and var OP expr]...` over the per-call
/// advance variable (`f <= f_chunk`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Predicate {
    pub var: Ident,
    pub clauses: Vec<(CmpOp, Expr)>,
    pub span: Span,
}

/// A callable to capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Callable {
    pub name: Ident,
    pub doc: Option<String>,
    /// Capture granularity (`step` or `chunk`).
    pub granularity: Spanned<Granularity>,
    /// Inner solver-loop clock (`loop: step`); its rate gives n_steps per call.
    pub loop_clock: Option<Ident>,
    pub admit: Option<Predicate>,
    pub effects: Spanned<Effects>,
    pub query: Spanned<QueryLength>,
    /// Query phases (`phases:`): per-phase quantity overrides of the input shapes; empty = one
    /// phase, the base values.
    pub phases: Vec<Phase>,
    /// `specialize: step`: each inner step index is a signature of its own.
    pub specialize: Option<Spanned<Specialize>>,
    /// Explicit tensor arguments, in call order.
    pub inputs: Vec<TensorArg>,
    /// Regions read without being passed as tensor arguments.
    pub reads: Vec<Ident>,
    /// Write-through regions 𝒲_o.
    pub writes: Vec<Ident>,
    /// `batch:`: the batch sizes the callable's graphs are captured for (`None` = `[1]`).
    pub batch: Option<Batch>,
    pub span: Span,
}

impl Callable {
    /// Regions this callable reads: region inputs then `reads:`, deduplicated, in order.
    pub fn read_regions(&self) -> Vec<&Ident> {
        let mut out: Vec<&Ident> = Vec::new();
        for a in &self.inputs {
            if let ArgSource::Region(r) = &a.source
                && !out.iter().any(|o| o.value == r.value)
            {
                out.push(r);
            }
        }
        for r in &self.reads {
            if !out.iter().any(|o| o.value == r.value) {
                out.push(r);
            }
        }
        out
    }
}
