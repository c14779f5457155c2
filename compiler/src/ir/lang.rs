//! Declarations beyond one arithmetic progression per region: trajectories, operating-point
//! dtype changes, query phases, loop specialisation, and offset views.

use super::{Expr, Ident, Span, Spanned};
use dcc_vocab::DType;

/// The advances a growing axis makes before its steady stride: the extent at call `k` is
/// `from + a_0 + … + a_{k−1}` (capped by the retention bound), where `a_0 = first`, the next
/// ones come from `schedule`, and every later one is `by`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Advances {
    /// What the first call adds (`first:`).
    pub first: Option<Expr>,
    /// The advances after `first`, in call order (`schedule: [..]`).
    pub schedule: Vec<Expr>,
}

impl Advances {
    /// `first` then `schedule`, in call order.
    pub fn all(&self) -> impl Iterator<Item = &Expr> {
        self.first.iter().chain(&self.schedule)
    }
    /// Whether the axis is a plain arithmetic progression (`from` + k·`by`).
    pub fn is_empty(&self) -> bool {
        self.first.is_none() && self.schedule.is_empty()
    }
}

/// The element types an operating point changes (`dtype: bf16` or `dtype: {kv: f16}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DTypeChange {
    /// Every `f32` region, constant and caller tensor becomes this type.
    AllF32(Spanned<DType>),
    /// The named regions and constants (`kv_cache`) and caller tensors (`flow.mu`: input `mu`
    /// of callable `flow`) become the given types.
    Named(Vec<(Ident, Spanned<DType>)>),
}

/// A query phase of a callable.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PhaseKind {
    /// The first call of a turn (at the first-call extents).
    First,
    /// Every later call.
    Steady,
    /// The final flush of a turn.
    Flush,
}

impl PhaseKind {
    pub const ALL: [PhaseKind; 3] = [PhaseKind::First, PhaseKind::Steady, PhaseKind::Flush];
    pub const fn name(self) -> &'static str {
        match self {
            PhaseKind::First => "first",
            PhaseKind::Steady => "steady",
            PhaseKind::Flush => "flush",
        }
    }
}

/// One declared query phase: the quantities its input shapes use instead of the base values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    pub kind: Spanned<PhaseKind>,
    pub overrides: Vec<PhaseOverride>,
}

/// One quantity a phase overrides, with one value or several (each a query configuration of
/// its own: a final flush of 1 to 27 tokens is 27 configurations).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseOverride {
    pub name: Ident,
    pub values: PhaseValues,
}

/// The values of a phase override.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PhaseValues {
    /// `f_query: 100`.
    One(Expr),
    /// `f_query: [28, 56]`.
    List(Vec<Expr>),
    /// `f_query: {from: 1, to: 54}`: every integer in between, both ends included.
    Range { from: Expr, to: Expr, span: Span },
}

/// What specialises a callable's signature beyond the extents (`specialize:`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Specialize {
    /// The inner loop's step index (`specialize: step`): one signature per step.
    Step,
}

// ---------------------------------------------------------------------------------------------
// Offset views (issue 8): a region read at a clock-dependent offset
// ---------------------------------------------------------------------------------------------

/// An offset view's position `K * VAR + SHIFT mod M`: slot `(K·VAR + SHIFT) mod M` of the axis,
/// where `VAR` counts the callable's calls (a delay ring read at `t mod 4`; a ring written two
/// slots per call read at `2 * t mod 250`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetAt {
    /// The call-index variable (a fresh name, like the admission variable).
    pub var: Ident,
    /// Slots the offset moves per call, K in `K * VAR` (`None` = 1).
    pub scale: Option<Expr>,
    /// Added to the call index before the modulus (`None` = 0).
    pub shift: Option<Expr>,
    /// The period M: the view takes M positions, `0..M`.
    pub modulus: Expr,
    pub span: Span,
}

/// `view: {axis: A, at: "t mod M", len: L}` on a region input: the callable reads `L` slots of
/// axis `A` starting at the moving offset, not the whole attended extent. In the signature the
/// axis has extent `L`; the offset moves the address, not the shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// A clock axis of the region.
    pub axis: Ident,
    pub at: OffsetAt,
    /// Extent of the view along `axis` (`len:`; default the literal 1).
    pub len: Expr,
    /// The whole `view:` mapping.
    pub span: Span,
}

// ---------------------------------------------------------------------------------------------
// Cross-session batching (issue 10)
// ---------------------------------------------------------------------------------------------

/// `batch: [1, 2, 4, 8, 16]` on a callable: the batch sizes its graphs are captured for, B
/// independent sessions whose rows share one call. Each batched signature is (class, B).
///
/// The sizes are literal integers, validated when the spec is lowered (non-empty, starting at
/// 1, strictly increasing); what bounds them (the capture limit on the graphs) is checked in
/// `derive`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The sizes, ascending, each with its span.
    pub sizes: Vec<Spanned<u64>>,
    /// `row_copies: cfg`: how many rows each row of the staged inputs becomes inside the call
    /// (classifier-free guidance runs every frame as a conditional and an unconditional row);
    /// `None` = 1.
    pub row_copies: Option<Expr>,
    /// The `batch:` list.
    pub span: Span,
}

impl Batch {
    /// The largest size (the last: the list is strictly increasing).
    pub fn largest(&self) -> u64 {
        self.sizes.last().map(|s| s.value).unwrap_or(1)
    }
}
