//! dcc-vocab: the words a native-clock contract is written in, shared by the compiler and the
//! runtime.
//!
//! The compiler (`dcc-compiler`) derives a contract from a spec; the runtime (`dcc-runtime`)
//! executes what the generated code describes. Both speak of the same element types, region
//! classes (Definition 1 of the paper: lifetime ℓ_r, mutability μ_r, placement p_r), cache
//! orders, kept slices, verdicts, granularities and effects. They are defined once, here, so the
//! two can never drift apart: a variant added here is a compile error in every `match` of both
//! crates until it is handled. The runtime re-exports everything from `dcc_runtime::contract`
//! (the path generated code uses); the compiler from `dcc_compiler::ir`.
//!
//! This crate has no dependencies, so depending on it never makes the runtime depend on the
//! compiler. Everything is `const`-constructible, so generated catalogs stay `static` data.
//!
//! Each type's `name()` is its spelling in specs (`f32`, `copy_on_write`, `device_rng`); `ALL`
//! lists the variants in declaration order (what a parser offers as "expected one of").

#![forbid(unsafe_code)]

/// Alignment of every device allocation, of a session arena and of every region offset in it.
///
/// The runtime's backends hand out 256-byte aligned allocations (the CUDA driver's guarantee,
/// which the Host twin copies); the compiler places each arena region at an offset that is a
/// multiple of this, so every region is as aligned as a fresh allocation would be.
pub const ALLOC_ALIGN: usize = 256;

/// Element type of a region, a tensor argument or a constant (β_r is [`DType::size`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DType {
    F32,
    /// Float64: the vocoder's F0 and harmonic phase are computed in double precision.
    F64,
    F16,
    BF16,
    I32,
    I64,
    U8,
    /// Boolean masks, one byte per element.
    Bool,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 8] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
    ];

    /// Width of one element in bytes (β in the paper).
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::F64 | DType::I64 => 8,
            DType::U8 | DType::Bool => 1,
        }
    }

    /// Spelling in specs and reports (`f32`, `bf16`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }
}

/// Lifetime ℓ_r of a region (Definition 1): how long its contents stay meaningful.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Lifetime {
    /// One operator (kernel): dead once the op that wrote it has been read.
    Operator,
    /// One iteration of the inner loop (`loop:`) of the callables that write the region: what
    /// one iteration writes is dead before the next begins, so the region holds one slice along
    /// that loop's clock, which every iteration reuses (a solver workspace written back into the
    /// carry by the step that filled it).
    Iteration,
    /// One call (unit of work) of the callable that writes it.
    Unit,
    Turn,
    Session,
    Process,
}

impl Lifetime {
    pub const ALL: [Lifetime; 6] = [
        Lifetime::Operator,
        Lifetime::Iteration,
        Lifetime::Unit,
        Lifetime::Turn,
        Lifetime::Session,
        Lifetime::Process,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Lifetime::Operator => "operator",
            Lifetime::Iteration => "iteration",
            Lifetime::Unit => "unit",
            Lifetime::Turn => "turn",
            Lifetime::Session => "session",
            Lifetime::Process => "process",
        }
    }

    /// Whether a region of this lifetime belongs to one session (`turn`, `session`: its
    /// contents outlive a call, so every stream needs its own copy), or to the process
    /// (`operator`, `iteration`, `unit`: dead once the call that wrote it returns, so streams whose calls
    /// never overlap — time-multiplexed on one device stream — can share one copy; `process`:
    /// one copy by definition). The session arena is split on this.
    pub const fn per_session(self) -> bool {
        matches!(self, Lifetime::Turn | Lifetime::Session)
    }
}

/// Mutability class μ_r of a region (Definition 1).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Mutability {
    /// Never written after initialization (prompt state within a turn, constants).
    Immutable,
    /// Shared across turns, copied before the first write of a turn.
    CopyOnWrite,
    /// Written in place by callables (the carry).
    Mutable,
    /// Contents meaningless between calls (solver workspace).
    Scratch,
}

impl Mutability {
    pub const ALL: [Mutability; 4] = [
        Mutability::Immutable,
        Mutability::CopyOnWrite,
        Mutability::Mutable,
        Mutability::Scratch,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Mutability::Immutable => "immutable",
            Mutability::CopyOnWrite => "copy_on_write",
            Mutability::Mutable => "mutable",
            Mutability::Scratch => "scratch",
        }
    }
}

/// Physical placement p_r of a region (Definition 1).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// In the session arena at a fixed offset (contract-owned, aliasable by captured graphs).
    Arena,
    /// Its own device allocation (address-stable, contract-owned); not in the arena.
    Device,
    /// Host memory; not in the arena, never aliased by a captured graph.
    Host,
}

impl Placement {
    pub const ALL: [Placement; 3] = [Placement::Arena, Placement::Device, Placement::Host];

    pub const fn name(self) -> &'static str {
        match self {
            Placement::Arena => "arena",
            Placement::Device => "device",
            Placement::Host => "host",
        }
    }
}

/// Order in which a prompt + retained-history cache stores its frames.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CacheOrder {
    /// Newest frames first, prompt-derived frames at the tail (the Token2Wav estimator cache).
    Prepend,
    /// Oldest first, newest frames appended at the end (the conformer cache).
    Append,
}

impl CacheOrder {
    pub const fn name(self) -> &'static str {
        match self {
            CacheOrder::Prepend => "prepend",
            CacheOrder::Append => "append",
        }
    }

    /// The other storage order.
    pub const fn other(self) -> CacheOrder {
        match self {
            CacheOrder::Prepend => CacheOrder::Append,
            CacheOrder::Append => CacheOrder::Prepend,
        }
    }
}

/// The slices a prompt + retained-history retention keeps, on the region's storage order
/// ([`CacheOrder`]): once the extent ℓ exceeds `head + tail`, `H[0:head] ‖ H[ℓ−tail:ℓ]`
/// (paper eq. 2). The runtime's carry kernels take exactly these two counts.
///
/// Storage order and kept slices are declared separately: the Token2Wav estimator cache is
/// prepend-ordered under both retentions; the paper keeps `head = retained, tail = prompt` (the
/// prepend order's natural rule), minicpmo-utils 1.0.7 keeps `head = prompt, tail = retained`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Keep {
    /// Frames kept at the start of the storage order.
    pub head: usize,
    /// Frames kept at the end of the storage order.
    pub tail: usize,
    /// The retention's declared prompt frames (`prompt:`).
    pub prompt: usize,
    /// The retention's declared retained frames (`retained:`).
    pub retained: usize,
}

impl Keep {
    /// The natural rule of `order`: `prepend` keeps the newest `retained` frames at the head and
    /// the `prompt` frames at the tail; `append` keeps the prompt at the head and the newest
    /// `retained` frames at the tail.
    pub const fn natural(order: CacheOrder, prompt: usize, retained: usize) -> Keep {
        let (head, tail) = match order {
            CacheOrder::Prepend => (retained, prompt),
            CacheOrder::Append => (prompt, retained),
        };
        Keep {
            head,
            tail,
            prompt,
            retained,
        }
    }

    /// Frames after retention, `head + tail` (= `prompt + retained`).
    pub const fn bound(&self) -> usize {
        self.head + self.tail
    }

    /// Whether this is `order`'s natural rule.
    pub const fn is_natural(&self, order: CacheOrder) -> bool {
        let n = Keep::natural(order, self.prompt, self.retained);
        n.head == self.head && n.tail == self.tail
    }
}

/// Scope verdict of a callable (paper §3.5, Criterion 1).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    Captured,
    /// Catalog too wide to capture exactly.
    OutWidth,
    /// Query length is traffic-dependent.
    OutQo,
    /// A region it touches grows for the whole session (`retention: none`, the paper's C2).
    OutUnbounded,
    /// An effect exact replay cannot admit (host randomness).
    OutEffects,
}

impl Verdict {
    /// The paper's spelling: `captured`, `out: width`, `out: Q_o`.
    pub const fn label(self) -> &'static str {
        match self {
            Verdict::Captured => "captured",
            Verdict::OutWidth => "out: width",
            Verdict::OutQo => "out: Q_o",
            Verdict::OutUnbounded => "out: unbounded",
            Verdict::OutEffects => "out: effects",
        }
    }
}

/// Clock at which a callable is captured (paper eq. 5).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// One graph per solver step.
    Step,
    /// The whole solver loop in one graph.
    Chunk,
}

impl Granularity {
    pub const fn name(self) -> &'static str {
        match self {
            Granularity::Step => "step",
            Granularity::Chunk => "chunk",
        }
    }
}

/// Declared effects of a callable: a set of the effects it has (`effects: [device_rng,
/// host_rng]`; the empty set is `none`). A set, not one word, because a callable can draw from
/// both generators (a vocoder drawing its phase on the host and its noise on the device).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Effects(u8);

impl Effects {
    /// No effect.
    pub const NONE: Effects = Effects(0);
    /// Draws from a device Philox stream advanced by a declared increment per call.
    pub const DEVICE_RNG: Effects = Effects(1);
    /// Draws from the host generator: never admissible to exact replay.
    pub const HOST_RNG: Effects = Effects(2);
    /// Every effect, with its spelling, in spelling order.
    pub const ALL: [(Effects, &'static str); 2] = [
        (Effects::DEVICE_RNG, "device_rng"),
        (Effects::HOST_RNG, "host_rng"),
    ];

    /// Both sets.
    pub const fn union(self, other: Effects) -> Effects {
        Effects(self.0 | other.0)
    }

    /// Whether every effect of `other` is in this set.
    pub const fn contains(self, other: Effects) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty (`none`).
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The spellings of the effects in the set, in spelling order (empty for `none`).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Effects::ALL
            .into_iter()
            .filter(move |(e, _)| self.contains(*e))
            .map(|(_, n)| n)
    }

    /// The set as a spec writes it: `none`, `device_rng`, or `[device_rng, host_rng]`.
    pub fn spelling(self) -> String {
        let names: Vec<&str> = self.names().collect();
        match names.as_slice() {
            [] => "none".to_string(),
            [one] => (*one).to_string(),
            many => format!("[{}]", many.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_rules_are_mirror_images() {
        let pre = Keep::natural(CacheOrder::Prepend, 302, 100);
        let app = Keep::natural(CacheOrder::Append, 302, 100);
        assert_eq!((pre.head, pre.tail), (100, 302));
        assert_eq!((app.head, app.tail), (302, 100));
        assert_eq!(pre.bound(), 402);
        assert!(pre.is_natural(CacheOrder::Prepend));
        assert!(!pre.is_natural(CacheOrder::Append));
        assert!(app.is_natural(CacheOrder::Prepend.other()));
    }

    #[test]
    fn spellings_are_distinct() {
        let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert_eq!(DType::ALL.map(DType::size), [4, 8, 2, 2, 4, 8, 1, 1]);
    }

    #[test]
    fn effect_sets() {
        let both = Effects::DEVICE_RNG.union(Effects::HOST_RNG);
        assert!(both.contains(Effects::HOST_RNG) && both.contains(Effects::DEVICE_RNG));
        assert!(!Effects::DEVICE_RNG.contains(Effects::HOST_RNG));
        assert!(Effects::NONE.is_empty() && !both.is_empty());
        assert_eq!(Effects::NONE.spelling(), "none");
        assert_eq!(Effects::HOST_RNG.spelling(), "host_rng");
        assert_eq!(both.spelling(), "[device_rng, host_rng]");
    }
}
