//! Result types of the derivations (paper eqs. 1–7).
//!
//! Every derived number is a [`Derivation`]: the value, the formula it came from and the named
//! inputs, so reports can print `402 = f_prompt 302 + f_retained 100` and code generation can
//! use the value. All integers are exact (`u64`); ratios keep numerator and denominator.

use std::fmt;

use crate::ir::{
    CacheOrder, DType, Effects, Granularity, KeepRule, LayoutDim, Lifetime, Mutability, Placement,
    QueryLength, Verdict,
};

/// A derived integer with the formula and inputs that produced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Derivation {
    pub value: u64,
    /// Symbolic formula, e.g. `f_prompt + f_retained`.
    pub formula: String,
    /// The named values the formula used, in order of first use.
    pub inputs: Vec<(String, i64)>,
}

impl Derivation {
    /// A derivation with no named inputs (a literal).
    pub fn literal(value: u64) -> Self {
        Derivation {
            value,
            formula: value.to_string(),
            inputs: Vec::new(),
        }
    }

    /// `402 = f_prompt 302 + f_retained 100`: the formula with each name followed by its value.
    pub fn explain(&self) -> String {
        let mut s = String::new();
        let mut rest = self.formula.as_str();
        // Annotate each identifier that is one of the inputs with its value.
        while !rest.is_empty() {
            let c = rest.chars().next().unwrap_or(' ');
            if c.is_ascii_alphabetic() || c == '_' {
                let end = rest
                    .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_' || ch == '.'))
                    .unwrap_or(rest.len());
                let word = &rest[..end];
                s.push_str(word);
                if let Some((_, v)) = self.inputs.iter().find(|(n, _)| n == word) {
                    s.push(' ');
                    s.push_str(&v.to_string());
                }
                rest = &rest[end..];
            } else {
                s.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        if self.inputs.is_empty() && s == self.value.to_string() {
            s
        } else {
            format!("{} = {}", self.value, s)
        }
    }
}

impl fmt::Display for Derivation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.explain())
    }
}

/// An exact ratio `num / den` (ρ, launch ratio).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Ratio {
    pub num: u64,
    pub den: u64,
}

impl Ratio {
    pub fn as_f64(self) -> f64 {
        if self.den == 0 {
            f64::INFINITY
        } else {
            self.num as f64 / self.den as f64
        }
    }
    /// Rounded to one decimal, as the paper prints ratios (`7.0`, `17.9`).
    pub fn rounded1(self) -> f64 {
        (self.as_f64() * 10.0).round() / 10.0
    }
}

/// A clock with its rate expressed against its base clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedClock {
    pub name: String,
    /// Base clock this one is ultimately derived from (itself for a base clock); empty for a
    /// product clock.
    pub base: String,
    /// Ticks of this clock per tick of `base` (1 for a base clock).
    pub per_base: u64,
    /// Factors of a product clock.
    pub factors: Vec<String>,
}

/// Catalog width of one region (eq. 7): `K_r = ceil(W_r / s_r) + 1`, pinned → 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogWidth {
    /// W_r = A_r − A_r⁻.
    pub window: Derivation,
    /// s_r, the advance per invocation (None when pinned).
    pub stride: Option<Derivation>,
    /// K_r.
    pub width: Derivation,
    /// Whether the retention pins the extent (W_r = 0).
    pub pinned: bool,
    /// The advances before the steady stride (`first`, `schedule`), in call order; empty for a
    /// plain progression.
    pub schedule: Vec<u64>,
    /// `retention: none`: nothing bounds the axis; the catalog covers only the storage the
    /// session is sized for (`envelope:`, else the first call).
    pub unbounded: bool,
}

/// One stock constant and the over-reservation it implies (eq. 3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StockRatio {
    pub name: String,
    /// Stock extents along the clock axes.
    pub extents: Vec<u64>,
    /// Elements along the clock axes: ∏ stock.
    pub reserved: Derivation,
    pub reserved_bytes: u64,
    /// ρ = reserved / declared live envelope.
    pub rho: Ratio,
}

/// The slices a prompt + history retention keeps on its storage order:
/// `H[0:head] ‖ H[ℓ−tail:ℓ]` (paper eq. 2), `head + tail` = the attended extent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedKeep {
    pub head: Derivation,
    pub tail: Derivation,
    /// The retention's `prompt` and `retained` frames.
    pub prompt: u64,
    pub retained: u64,
    /// Which rule the slices follow on the storage order.
    pub rule: KeepRule,
    /// Whether `keep:` was written (false: the order's natural rule by default).
    pub declared: bool,
}

impl DerivedKeep {
    /// `H[0:100] ‖ H[ℓ−302:ℓ]`.
    pub fn slices(&self) -> String {
        format!("H[0:{}] ‖ H[ℓ−{}:ℓ]", self.head.value, self.tail.value)
    }

    /// What the rule is, in words: `prepend rule (default): newest f_retained at the head,
    /// f_prompt at the tail`.
    pub fn describe(&self, order: CacheOrder) -> String {
        let part = |v: &Derivation| {
            if v.formula.chars().all(|c| c.is_ascii_digit()) {
                v.value.to_string()
            } else {
                format!("{} = {}", v.formula, v.value)
            }
        };
        let what = match self.rule {
            KeepRule::Natural => format!("the `{}` rule", order.name()),
            KeepRule::Swapped => format!(
                "the `{}` rule on `{}` storage",
                order.other().name(),
                order.name()
            ),
            KeepRule::Split => "a custom split".to_string(),
        };
        format!(
            "{} — {}{}: head {}, tail {}",
            self.slices(),
            what,
            if self.declared { "" } else { " (default)" },
            part(&self.head),
            part(&self.tail)
        )
    }
}

/// Everything derived for one region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedRegion {
    pub name: String,
    pub dtype: DType,
    pub lifetime: Lifetime,
    pub mutability: Mutability,
    pub placement: Placement,
    pub order: Option<CacheOrder>,
    /// Kept slices of a prompt + history retention (on `order`).
    pub keep: Option<DerivedKeep>,
    /// Clock axis names, outermost first.
    pub axes: Vec<String>,
    /// Index of the growing axis.
    pub growing_axis: Option<usize>,
    /// A_r along the growing axis (or the last axis when pinned): what consumers read.
    pub attended_extent: Derivation,
    /// A_r⁻: the lowest attended extent once the policy fires.
    pub attended_min: Derivation,
    /// Envelope per clock axis: what storage must hold before truncation.
    pub envelope_axes: Vec<Derivation>,
    /// ∏ envelope axes (e.g. `10 × 402 = 4020`).
    pub envelope_extent: Derivation,
    /// Per-tick element shape.
    pub shape: Vec<u64>,
    /// Bytes per tick: β × ∏ shape.
    pub tick_bytes: Derivation,
    /// Storage order of the dims (`layout:`; default clock axes then shape).
    pub layout: Vec<LayoutDim>,
    /// Name of each storage dim: the clock axis, or the shape entry as written.
    pub dim_names: Vec<String>,
    /// Full envelope dims in storage order (`layout`).
    pub dims: Vec<u64>,
    /// Bytes the demand-sized region holds (envelope).
    pub live_bytes: u64,
    /// Bytes at the attended extent (growing axis = A_r).
    pub attended_bytes: u64,
    /// The attended extents a consumer can see, ascending (the region's catalog).
    pub catalog: Vec<u64>,
    pub width: CatalogWidth,
    /// Stock constants replaced; the first is the primary (`rho`).
    pub stock: Vec<StockRatio>,
    /// Switched off at this operating point (`disable:`): extent 0, no bytes.
    pub disabled: bool,
}

impl DerivedRegion {
    /// Primary stock reservation in bytes (first stock constant), if any.
    pub fn reserved_bytes(&self) -> Option<u64> {
        self.stock.first().map(|s| s.reserved_bytes)
    }
    /// Primary ρ, if a stock constant is declared.
    pub fn rho(&self) -> Option<Ratio> {
        self.stock.first().map(|s| s.rho)
    }
}

/// A constant, sized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedConstant {
    pub name: String,
    pub dtype: DType,
    pub placement: Placement,
    pub shape: Vec<u64>,
    pub bytes: u64,
}

/// One tensor argument of one catalog class, fully specialized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgSig {
    pub name: String,
    pub dims: Vec<u64>,
    pub dtype: DType,
    /// Contract-owned and aliased by pointer (never staged).
    pub aliased: bool,
    /// Region or constant this argument is bound to.
    pub bound_to: Option<String>,
    pub bytes: u64,
}

/// One catalog class of a callable at one granularity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassSig {
    pub index: usize,
    /// Attended extent of each varying region read (`(region, extent)`), in read order.
    pub extents: Vec<(String, u64)>,
    pub args: Vec<ArgSig>,
    /// Σ bytes of non-aliased args: this class's staging footprint.
    pub staging_bytes: u64,
    /// The query phases presented with this signature (`first, steady`); `None` without
    /// `phases:`.
    pub phase: Option<String>,
    /// The inner step index (`specialize: step`, at step granularity).
    pub step: Option<u64>,
}

/// M_reserve (eq. 6) at one granularity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserve {
    pub granularity: Granularity,
    /// Σ_classes Σ_non-aliased inputs bytes.
    pub staging_bytes: u64,
    /// Σ_write-through β ∏ A†.
    pub write_through_bytes: u64,
    /// staging + write-through.
    pub total_bytes: u64,
    /// Σ_classes Σ_all inputs bytes: the staging term if nothing were aliased (replay without
    /// the state rule, Table 5 arms R/Rc), at demand-sized extents.
    pub staging_unaliased_bytes: u64,
    /// False when the classes could not all be enumerated (traffic-dependent 𝒬_o, or more than
    /// [`crate::derive::MAX_ENUMERATED_CLASSES`]): the sums then cover the extent catalog only.
    pub complete: bool,
    /// Largest single input (bytes) at this granularity, e.g. the stacked carry at chunk.
    pub largest_input: Option<(String, u64)>,
    /// Host launches per chunk relative to step granularity (1/n_steps at chunk).
    pub host_launches_per_chunk: u64,
    /// Per-class signatures at this granularity (empty when the catalog exceeds the capture
    /// limit; the sums above still cover every enumerated class).
    pub classes: Vec<ClassSig>,
    /// How many distinct signatures the classes are (`None` when they were not enumerated).
    pub signatures: Option<u64>,
}

/// Width contribution of one region to a callable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionWidth {
    pub region: String,
    pub width: u64,
    pub pinned: bool,
}

/// Everything derived for one callable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedCallable {
    pub name: String,
    pub granularity: Granularity,
    pub effects: Effects,
    pub query: QueryLength,
    /// Regions read, region inputs first.
    pub reads: Vec<String>,
    /// Write-through regions.
    pub writes: Vec<String>,
    /// 𝓛: attended extents of the specializing region (the varying region read with the most
    /// extents, ties broken by name; when none varies, the pinned one with the largest extent),
    /// ascending.
    pub attended_extents: Vec<u64>,
    /// Region whose extents `attended_extents` lists.
    pub specializing_region: Option<String>,
    /// eq. 4 for a prompt + history region: `K = ceil(f_retained / f_chunk) + 1`.
    pub catalog_size: Derivation,
    /// K_r per region read.
    pub region_widths: Vec<RegionWidth>,
    /// ∏ K_r over the regions read: eq. 7's width, the bound on the extent tuples; `None` when
    /// it overflows 64 bits (no error while the reachable count fits).
    pub catalog_width: Option<u64>,
    /// |𝒬_o|: the query phases (1 without `phases:`).
    pub configs: u64,
    /// The phases' names (`steady`, `first`, `flush`); empty without `phases:`.
    pub phases: Vec<String>,
    /// `specialize: step`: the loop's step count that multiplies the catalog at step
    /// granularity.
    pub specialized_steps: Option<u64>,
    /// Extent tuples a session can reach (the walk of [`crate::derive::reach`]): ≤ ∏ K_r, fewer
    /// when regions advance together; None on overflow.
    pub reachable: Option<u64>,
    /// Regions read that advance together (one clock trajectory), each group with its count.
    pub lockstep: Vec<crate::derive::reach::LockstepGroup>,
    /// The distinct signatures of the catalog at the declared granularity (phases × reachable
    /// tuples × specialised steps, equal signatures once), or None when 𝒬_o is
    /// traffic-dependent or a region grows without bound.
    pub classes: Option<u64>,
    /// |𝒬_o| × ∏ K_r (× steps when specialised): eq. 7's upper bound on `classes`, or None
    /// when 𝒬_o is traffic-dependent or the product overflows.
    pub classes_bound: Option<u64>,
    /// Upper bound on extra classes from partial flushes at turn ends (≤ s_r, bounded by the
    /// admission predicate converted to the specializing region's clock), with its formula.
    pub flush_classes: Option<Derivation>,
    /// The clock `flush_classes` counts ticks of (the specializing region's driving clock).
    pub flush_clock: Option<String>,
    pub verdict: Verdict,
    /// Why, in words a person can act on.
    pub reason: String,
    /// n_steps of the loop clock (1 if none).
    pub steps: u64,
    /// M_reserve at step granularity.
    pub reserve_step: Reserve,
    /// M_reserve at chunk granularity.
    pub reserve_chunk: Reserve,
    /// Host launches chunk / step = 1 / n_steps.
    pub launch_ratio: Ratio,
    /// The batched catalog (`batch:`), `None` for a callable served one session per call.
    pub batch: Option<DerivedBatch>,
}

/// A batched callable's catalog: every batchable class × every batch size (`derive/batch.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedBatch {
    /// The declared sizes B, ascending, starting at 1.
    pub sizes: Vec<u64>,
    /// Rows one session presents: the staged inputs' leading extent × `row_copies`
    /// (`100 = f_chunk 50 * cfg 2`).
    pub rows_per_session: Derivation,
    /// The staged input the rows are read from (the first whose leading extent is not 1).
    pub row_input: Option<String>,
    /// `row_copies` (1 when not declared).
    pub row_copies: u64,
    /// Per class (the index of the callable's catalog): whether sessions in it batch. A class
    /// batches when its staged inputs have the steady shapes; one whose inputs differ (another
    /// query phase's lengths) runs alone, at B = 1.
    pub batchable: Vec<bool>,
    /// Graphs to capture: Σ over classes of |sizes| (batchable) or 1.
    pub graphs: u64,
    /// B × rows_per_session for each size, in the order of `sizes`.
    pub rows: Vec<u64>,
    /// The largest row count any graph presents: largest B × rows_per_session.
    pub m_reserve_rows: u64,
}

/// What batching costs a process (`derive/batch.rs`): the per-process regions whose lifetime
/// is one call (`operator`, `unit`) and that a batched callable reads or writes get one copy
/// per batch slot; the per-session part does not change (each session keeps its own) and
/// `process` regions are one copy by definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedBatching {
    /// The largest batch size of any callable.
    pub largest: u64,
    /// The regions that get one copy per batch slot, in arena order.
    pub slot_regions: Vec<String>,
    /// Σ of their aligned bytes: what each batch slot beyond the first adds.
    pub slot_bytes: u64,
    /// The per-process part at the largest batch: `process_bytes + (largest − 1) × slot_bytes`.
    pub process_bytes_at_largest: u64,
    /// The largest row count any batched graph presents (max over callables).
    pub m_reserve_rows: u64,
}

impl DerivedBatching {
    /// The per-process bytes at batch size `b` (`b` = 0 counts as 1), `None` on overflow.
    pub fn process_bytes_at(&self, arena: &DerivedArena, b: u64) -> Option<u64> {
        b.saturating_sub(1)
            .checked_mul(self.slot_bytes)?
            .checked_add(arena.process_bytes())
    }
}

impl DerivedCallable {
    /// ∏ K_r in words: the number, or `more than 2^64` when it overflows.
    pub fn catalog_width_text(&self) -> String {
        self.catalog_width
            .map(|w| w.to_string())
            .unwrap_or_else(|| "more than 2^64".into())
    }

    /// M_reserve at the callable's declared granularity.
    pub fn reserve(&self) -> &Reserve {
        match self.granularity {
            Granularity::Step => &self.reserve_step,
            Granularity::Chunk => &self.reserve_chunk,
        }
    }
}

/// One region's place in the session arena.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaSlot {
    pub region: String,
    /// Byte offset from the arena's start, a multiple of [`DerivedArena::align`].
    pub offset: u64,
    /// The region's bytes (its envelope).
    pub bytes: u64,
    /// `bytes` rounded up to the alignment: where the next region starts, relative to this one.
    pub padded_bytes: u64,
    /// In the per-session part (lifetime `turn` / `session`), else the per-process part.
    pub per_session: bool,
}

/// The layout of one session's arena (`placement: arena` regions: the per-session ones, then
/// the per-process ones, each in declaration order; see `derive/arena.rs`). The
/// report and the generated module both read it: `total_bytes` is the generated `ARENA_BYTES`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedArena {
    /// Alignment of the arena and of every offset in it (bytes).
    pub align: u64,
    pub slots: Vec<ArenaSlot>,
    /// Σ bytes of the arena regions (demand-sized, before alignment).
    pub live_bytes: u64,
    /// Bytes of the per-session part `[0, session_bytes)`: every session holds its own.
    pub session_bytes: u64,
    /// Bytes of both parts: the last region's end, aligned (live + padding). One session
    /// alone costs this; N sessions sharing the per-process part cost
    /// `N × session_bytes + process_bytes()`.
    pub total_bytes: u64,
}

impl DerivedArena {
    /// The slot of region `name`, if it is in the arena.
    pub fn slot(&self, name: &str) -> Option<&ArenaSlot> {
        self.slots.iter().find(|s| s.region == name)
    }
    /// Bytes spent on alignment: `total_bytes - live_bytes`.
    pub fn padding(&self) -> u64 {
        self.total_bytes - self.live_bytes
    }
    /// Bytes of the per-process part `[session_bytes, total_bytes)`, shared by every session
    /// of a stream.
    pub fn process_bytes(&self) -> u64 {
        self.total_bytes - self.session_bytes
    }
}

/// A quantity's value and the expression that defined it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedQuantity {
    pub name: String,
    pub value: i64,
    pub derivation: Derivation,
}

/// Everything derived from a spec at one operating point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Derived {
    /// `base` or the operating point's name.
    pub operating_point: String,
    /// The overrides applied (`n_steps = 5`).
    pub overrides: Vec<(String, i64)>,
    pub quantities: Vec<DerivedQuantity>,
    pub clocks: Vec<DerivedClock>,
    pub regions: Vec<DerivedRegion>,
    pub constants: Vec<DerivedConstant>,
    pub callables: Vec<DerivedCallable>,
    /// The session arena: every arena region's offset, and the total one session allocates.
    pub arena: DerivedArena,
    /// Σ primary stock bytes of the regions that declare one.
    pub stock_bytes: u64,
    /// The capture limit used for `out: width`.
    pub capture_limit: u64,
    /// What the batched callables cost a process; `None` when no callable declares `batch:`.
    pub batching: Option<DerivedBatching>,
}

impl Derived {
    pub fn quantity(&self, name: &str) -> Option<i64> {
        self.quantities
            .iter()
            .find(|q| q.name == name)
            .map(|q| q.value)
    }
    pub fn region(&self, name: &str) -> Option<&DerivedRegion> {
        self.regions.iter().find(|r| r.name == name)
    }
    pub fn callable(&self, name: &str) -> Option<&DerivedCallable> {
        self.callables.iter().find(|c| c.name == name)
    }
}
