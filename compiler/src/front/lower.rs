//! Spanned YAML tree → typed IR. Reports unknown keys (with suggestions), missing keys,
//! duplicate keys, wrong types and malformed expressions, and keeps going so one run reports
//! as many errors as possible.

use super::yaml::{Node, NodeKind};
use crate::diag::{Code, Diagnostic};
use crate::expr;
use crate::ir::*;

mod batch;
mod phases;
mod points;
mod trajectory;

/// Lower the document root into a [`Spec`].
pub fn lower(text: &str, root: &Node) -> Result<Spec, Vec<Diagnostic>> {
    let mut l = Lower {
        text,
        diags: Vec::new(),
        split: Vec::new(),
    };
    let spec = l.spec(root);
    if l.diags.is_empty()
        && let Some(spec) = spec
    {
        return Ok(spec);
    }
    if l.diags.is_empty() {
        l.diags.push(
            Diagnostic::error(Code::EmptySpec, root.span, "spec could not be read")
                .help("see the examples in specs/"),
        );
    }
    Err(l.diags)
}

const TOP_KEYS: &[&str] = &[
    "family",
    "description",
    "clocks",
    "quantities",
    "operating_points",
    "capture_limit",
    "regions",
    "constants",
    "callables",
];
const REGION_KEYS: &[&str] = &[
    "doc",
    "clock",
    "growth",
    "retention",
    "lifetime",
    "mutability",
    "placement",
    "dtype",
    "shape",
    "layout",
    "envelope",
    "stock",
];
const KEEP_KEYS: &[&str] = &["head", "tail"];
const GROWS_KEYS: &[&str] = &["from", "by", "call", "first", "schedule"];
const CONSTANT_KEYS: &[&str] = &["doc", "dtype", "shape", "placement"];
const CALLABLE_KEYS: &[&str] = &[
    "doc",
    "granularity",
    "loop",
    "admit",
    "effects",
    "query",
    "phases",
    "specialize",
    "configs",
    "inputs",
    "reads",
    "writes",
    "batch",
    "row_copies",
];
const INPUT_KEYS: &[&str] = &["region", "constant", "dtype", "shape", "alias", "view"];

/// Entries of a mapping after duplicate/unknown-key checks.
pub(super) struct Fields<'a> {
    entries: Vec<(&'a str, &'a Node, &'a Node)>,
    span: Span,
}

impl<'a> Fields<'a> {
    pub(super) fn get(&self, key: &str) -> Option<&'a Node> {
        self.entries
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|(_, _, v)| *v)
    }
}

pub(super) struct Lower<'t> {
    pub(super) text: &'t str,
    pub(super) diags: Vec<Diagnostic>,
    /// Scalars that are pieces of an expression YAML split at a comma (already reported).
    pub(super) split: Vec<Span>,
}

impl<'t> Lower<'t> {
    pub(super) fn wrong_type(&mut self, node: &Node, expected: &str, help: &str) {
        self.diags.push(
            Diagnostic::error(
                Code::WrongType,
                node.span,
                format!("expected {expected}, found {}", node.describe()),
            )
            .label(format!("expected {expected}"))
            .help(help.to_string()),
        );
    }

    /// Mapping entries with string keys; duplicates reported (first kept).
    fn entries<'a>(
        &mut self,
        node: &'a Node,
        what: &str,
        help: &str,
    ) -> Option<Vec<(&'a str, &'a Node, &'a Node)>> {
        let NodeKind::Map(items) = &node.kind else {
            if node.is_null() {
                return Some(Vec::new());
            }
            self.wrong_type(node, &format!("a mapping ({what})"), help);
            return None;
        };
        let mut out: Vec<(&'a str, &'a Node, &'a Node)> = Vec::new();
        let mut seen: std::collections::HashMap<&'a str, usize> = std::collections::HashMap::new();
        for (i, (k, v)) in items.iter().enumerate() {
            let prev = i
                .checked_sub(1)
                .and_then(|p| items.get(p))
                .map(|(a, b)| (a, b));
            if self.split_in_map(prev, k) {
                continue;
            }
            let NodeKind::Scalar { text, .. } = &k.kind else {
                self.wrong_type(
                    k,
                    "a plain key",
                    "keys are names like `f_prompt` or `carry`",
                );
                continue;
            };
            if let Some((_, first, _)) = seen.get(text.as_str()).and_then(|i| out.get(*i)) {
                self.diags.push(
                    Diagnostic::error(
                        Code::DuplicateKey,
                        k.span,
                        format!("duplicate key `{text}` in {what}"),
                    )
                    .label("duplicate key")
                    .with_secondary(first.span, "first defined here")
                    .help(format!(
                        "remove one of the two `{text}` entries (YAML would silently keep only one)"
                    )),
                );
                continue;
            }
            seen.insert(text.as_str(), out.len());
            out.push((text.as_str(), k, v));
        }
        Some(out)
    }

    /// A mapping with a fixed key set.
    pub(super) fn fields<'a>(
        &mut self,
        node: &'a Node,
        what: &str,
        owner: Span,
        allowed: &[&str],
        required: &[&str],
    ) -> Option<Fields<'a>> {
        let help = format!("{what} is a mapping with keys: {}", allowed.join(", "));
        let entries = self.entries(node, what, &help)?;
        let mut kept = Vec::new();
        for (k, kn, v) in entries {
            if allowed.contains(&k) {
                kept.push((k, kn, v));
            } else {
                let mut d = Diagnostic::error(
                    Code::UnknownKey,
                    kn.span,
                    format!("unknown key `{k}` in {what}"),
                )
                .label("unknown key");
                d = match suggest(k, allowed) {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.help(format!("allowed keys here: {}", allowed.join(", "))),
                };
                self.diags.push(d);
            }
        }
        for r in required {
            if !kept.iter().any(|(k, _, _)| k == r) {
                self.diags.push(
                    Diagnostic::error(Code::MissingKey, owner, format!("{what} is missing `{r}`"))
                        .label(format!("`{r}` is required here"))
                        .help(format!("add `{r}:` ({})", key_hint(r))),
                );
            }
        }
        Some(Fields {
            entries: kept,
            span: node.span,
        })
    }

    fn scalar<'a>(&mut self, node: &'a Node, expected: &str, help: &str) -> Option<&'a str> {
        match &node.kind {
            NodeKind::Scalar { text, .. } => Some(text.as_str()),
            _ => {
                self.wrong_type(node, expected, help);
                None
            }
        }
    }

    pub(super) fn ident(&mut self, node: &Node, what: &str) -> Option<Ident> {
        let help = format!("{what} is a name made of letters, digits and `_`, like `f_chunk`");
        let text = self.scalar(node, "a name", &help)?;
        if !is_ident(text) {
            self.diags.push(
                Diagnostic::error(
                    Code::BadValue,
                    node.span,
                    format!("`{}` is not a valid name", clip(text)),
                )
                .label(format!("expected {what}"))
                .help(help),
            );
            return None;
        }
        Some(Spanned::new(text.to_string(), node.span))
    }

    fn string(&mut self, node: &Node) -> Option<String> {
        self.scalar(node, "text", "write the text on one line or as a `|` block")
            .map(|s| s.to_string())
    }

    /// Offset where the scalar's text starts in the source, if the text maps 1:1 onto it.
    pub(super) fn text_base(&self, node: &Node, text: &str) -> Option<usize> {
        let src = self.text.get(node.span.start..node.span.end)?;
        if src == text {
            return Some(node.span.start);
        }
        // Quoted: 'text' or "text".
        if src.len() == text.len() + 2 && src.get(1..src.len() - 1) == Some(text) {
            return Some(node.span.start + 1);
        }
        None
    }

    pub(super) fn with_base<T>(
        &mut self,
        node: &Node,
        text: &str,
        f: impl Fn(&str, usize) -> Result<T, Diagnostic>,
    ) -> Option<T> {
        match self.text_base(node, text) {
            Some(base) => match f(text, base) {
                Ok(v) => Some(v),
                Err(d) => {
                    self.diags.push(d);
                    None
                }
            },
            None => {
                // Text does not map 1:1 (escapes, folding): point at the whole node.
                match f(text, 0) {
                    Ok(v) => Some(v),
                    Err(mut d) => {
                        d.span = node.span;
                        d.secondary.clear();
                        self.diags.push(d);
                        None
                    }
                }
            }
        }
    }

    pub(super) fn fix_spans(e: &mut Expr, span: Span) {
        e.span = span;
        match &mut e.kind {
            ExprKind::Int(_) | ExprKind::Name(_) => {}
            ExprKind::Measure(_, u) => {
                u.num.span = span;
                if let Some(d) = &mut u.den {
                    d.span = span;
                }
            }
            ExprKind::Extent(r) => r.span = span,
            ExprKind::Neg(x) => Self::fix_spans(x, span),
            ExprKind::Binary(_, a, b) => {
                Self::fix_spans(a, span);
                Self::fix_spans(b, span);
            }
            ExprKind::Call(_, args) => args.iter_mut().for_each(|a| Self::fix_spans(a, span)),
        }
    }

    pub(super) fn expr(&mut self, node: &Node) -> Option<Expr> {
        let help =
            "write an integer (`302`) or an expression over quantities (`f_prompt + f_retained`)";
        if self.split.contains(&node.span) {
            return None;
        }
        let NodeKind::Scalar { text, plain } = &node.kind else {
            self.wrong_type(node, "an integer expression", help);
            return None;
        };
        if *plain && (text == "true" || text == "false" || node.is_null()) {
            self.wrong_type(node, "an integer expression", help);
            return None;
        }
        let mapped = self.text_base(node, text).is_some();
        let mut e = self.with_base(node, text, expr::parse_expr)?;
        if !mapped {
            Self::fix_spans(&mut e, node.span);
        }
        Some(e)
    }

    fn expr_list(&mut self, node: &Node, what: &str) -> Option<Vec<Expr>> {
        let NodeKind::Seq(items) = &node.kind else {
            self.wrong_type(
                node,
                &format!("a list ({what})"),
                "write a list of integer expressions, e.g. `[16, 2, 8, 128]`",
            );
            return None;
        };
        if self.split_in_list(node, items) {
            return None;
        }
        let mut out = Vec::new();
        let mut ok = true;
        for i in items {
            match self.expr(i) {
                Some(e) => out.push(e),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn ident_list(&mut self, node: &Node, what: &str) -> Option<Vec<Ident>> {
        match &node.kind {
            NodeKind::Seq(items) => {
                let mut out = Vec::new();
                let mut ok = true;
                for i in items {
                    match self.ident(i, what) {
                        Some(id) => out.push(id),
                        None => ok = false,
                    }
                }
                ok.then_some(out)
            }
            NodeKind::Scalar { .. } if !node.is_null() => self.ident(node, what).map(|i| vec![i]),
            _ if node.is_null() => Some(Vec::new()),
            _ => {
                self.wrong_type(
                    node,
                    &format!("a list of names ({what})"),
                    "write `[a, b]` or a single name",
                );
                None
            }
        }
    }

    fn word<T: Copy>(
        &mut self,
        node: &Node,
        what: &str,
        options: &[(&str, T)],
    ) -> Option<Spanned<T>> {
        let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
        let help = format!("{what} is one of: {}", names.join(", "));
        let text = self.scalar(node, &format!("a word ({what})"), &help)?;
        if let Some((_, v)) = options.iter().find(|(n, _)| *n == text) {
            return Some(Spanned::new(*v, node.span));
        }
        let mut d = Diagnostic::error(
            Code::BadValue,
            node.span,
            format!("`{}` is not a valid {what}", clip(text)),
        )
        .label(format!("expected one of: {}", names.join(", ")));
        d = match suggest(text, &names) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d.help(help),
        };
        self.diags.push(d);
        None
    }

    fn bool(&mut self, node: &Node, what: &str) -> Option<Spanned<bool>> {
        self.word(node, what, &[("true", true), ("false", false)])
    }

    fn dtype(&mut self, node: &Node) -> Option<Spanned<DType>> {
        let opts: Vec<(&str, DType)> = DType::ALL.iter().map(|d| (d.name(), *d)).collect();
        self.word(node, "dtype", &opts)
    }

    fn placement(&mut self, node: &Node) -> Option<Spanned<Placement>> {
        let opts: Vec<(&str, Placement)> = Placement::ALL.iter().map(|d| (d.name(), *d)).collect();
        self.word(node, "placement", &opts)
    }

    // -----------------------------------------------------------------------------------------

    fn spec(&mut self, root: &Node) -> Option<Spec> {
        if !matches!(root.kind, NodeKind::Map(_)) {
            self.diags.push(
                Diagnostic::error(
                    Code::EmptySpec,
                    root.span,
                    format!("a spec is a mapping, found {}", root.describe()),
                )
                .label("top level of the spec")
                .help("start with `family: <name>` followed by `clocks:`, `quantities:`, `regions:` and `callables:`"),
            );
            return None;
        }
        let top = Span::new(root.span.start, root.span.start);
        let f = self.fields(
            root,
            "the spec",
            top,
            TOP_KEYS,
            &["family", "clocks", "quantities", "regions", "callables"],
        )?;
        let family = f
            .get("family")
            .and_then(|n| self.ident(n, "the family name"));
        let description = f.get("description").and_then(|n| self.string(n));
        let clocks = f.get("clocks").map(|n| self.clocks(n)).unwrap_or_default();
        let quantities = f
            .get("quantities")
            .map(|n| self.quantities(n, "`quantities`"))
            .unwrap_or_default();
        let operating_points = f
            .get("operating_points")
            .map(|n| self.operating_points(n))
            .unwrap_or_default();
        let capture_limit = f
            .get("capture_limit")
            .and_then(|n| self.expr(n).map(|e| Spanned::new(e, n.span)));
        let regions = f
            .get("regions")
            .map(|n| self.regions(n))
            .unwrap_or_default();
        let constants = f
            .get("constants")
            .map(|n| self.constants(n))
            .unwrap_or_default();
        let callables = f
            .get("callables")
            .map(|n| self.callables(n))
            .unwrap_or_default();
        Some(Spec {
            family: family?,
            description,
            clocks,
            quantities,
            operating_points,
            regions,
            constants,
            callables,
            capture_limit,
        })
    }

    fn clocks(&mut self, node: &Node) -> Vec<Clock> {
        let help = "clocks map names to `base`, `RATE per CLOCK` or a product `[a, b]`";
        let Some(entries) = self.entries(node, "`clocks`", help) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (_, k, v) in entries {
            let Some(name) = self.ident(k, "a clock name") else {
                continue;
            };
            let span = k.span.to(v.span);
            let kind = match &v.kind {
                NodeKind::Seq(_) => match self.ident_list(v, "clock factors") {
                    Some(f) => ClockKind::Product(f),
                    None => continue,
                },
                NodeKind::Scalar { text, .. } if text == "base" => ClockKind::Base,
                NodeKind::Scalar { text, plain } if !(*plain && v.is_null()) => {
                    let text = text.clone();
                    match self.with_base(v, &text, expr::parse_rate) {
                        Some((rate, per)) => {
                            let mapped = self.text_base(v, &text).is_some();
                            let (mut rate, mut per) = (rate, per);
                            if !mapped {
                                Self::fix_spans(&mut rate, v.span);
                                per.span = v.span;
                            }
                            ClockKind::Rate { rate, per }
                        }
                        None => continue,
                    }
                }
                _ => {
                    self.wrong_type(v, "a clock definition", help);
                    continue;
                }
            };
            out.push(Clock { name, kind, span });
        }
        out
    }

    fn quantities(&mut self, node: &Node, what: &str) -> Vec<Quantity> {
        let help = "quantities map names to integer expressions, e.g. `f_retained: 100`";
        self.named(node, what, help, |this, k, v| {
            let name = this.ident(k, "a quantity name");
            let e = this.expr(v);
            Some(Quantity {
                name: name?,
                expr: e?,
            })
        })
    }

    fn operating_points(&mut self, node: &Node) -> Vec<OperatingPoint> {
        let help = "operating_points map a name to quantity overrides, e.g. `duplex: {n_steps: 5}`";
        self.named(node, "`operating_points`", help, Self::operating_point)
    }

    /// The entries of the mapping `node`, each lowered by `item`; entries it rejects are left
    /// out (their diagnostics already pushed).
    fn named<T>(
        &mut self,
        node: &Node,
        what: &str,
        help: &str,
        mut item: impl FnMut(&mut Self, &Node, &Node) -> Option<T>,
    ) -> Vec<T> {
        let Some(entries) = self.entries(node, what, help) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (_, k, v) in entries {
            if let Some(x) = item(self, k, v) {
                out.push(x);
            }
        }
        out
    }

    fn regions(&mut self, node: &Node) -> Vec<Region> {
        let help =
            "regions map a name to a region contract (clock, growth, retention, lifetime, ...)";
        self.named(node, "`regions`", help, Self::region)
    }

    fn region(&mut self, k: &Node, v: &Node) -> Option<Region> {
        let name = self.ident(k, "a region name")?;
        let what = format!("region `{}`", name.value);
        let f = self.fields(
            v,
            &what,
            k.span,
            REGION_KEYS,
            &[
                "clock",
                "retention",
                "lifetime",
                "mutability",
                "placement",
                "dtype",
                "shape",
            ],
        )?;
        let doc = f.get("doc").and_then(|n| self.string(n));
        let clock_node = f.get("clock");
        let clock = clock_node.and_then(|n| self.ident_list(n, "a clock name"));
        let clock_span = clock_node.map(|n| n.span).unwrap_or(k.span);
        let growth_node = f.get("growth");
        let growth = match growth_node {
            Some(n) => self.growth(n),
            None => Some(Vec::new()),
        };
        let growth_span = growth_node.map(|n| n.span).unwrap_or(k.span);
        let lifetime = f.get("lifetime").and_then(|n| {
            let opts: Vec<(&str, Lifetime)> =
                Lifetime::ALL.iter().map(|l| (l.name(), *l)).collect();
            self.word(n, "lifetime", &opts)
        });
        let mutability = f.get("mutability").and_then(|n| {
            let opts: Vec<(&str, Mutability)> =
                Mutability::ALL.iter().map(|l| (l.name(), *l)).collect();
            self.word(n, "mutability class", &opts)
        });
        let retention = f.get("retention").and_then(|n| self.retention(n));
        let placement = f.get("placement").and_then(|n| self.placement(n));
        let dtype = f.get("dtype").and_then(|n| self.dtype(n));
        let shape_node = f.get("shape");
        let shape = shape_node.and_then(|n| self.expr_list(n, "per-tick element shape"));
        let shape_span = shape_node.map(|n| n.span).unwrap_or(k.span);
        let layout = f.get("layout").map(|n| {
            self.expr_list(n, "storage order of the dims")
                .map(|v| Spanned::new(v, n.span))
        });
        let envelope = f.get("envelope").and_then(|n| self.expr(n));
        let stock = match f.get("stock") {
            Some(n) => self.stock(n)?,
            None => Vec::new(),
        };
        Some(Region {
            span: k.span.to(f.span),
            name,
            doc,
            clock: clock?,
            clock_span,
            growth: growth?,
            growth_span,
            lifetime: lifetime?,
            mutability: mutability?,
            retention: retention?,
            placement: placement?,
            dtype: dtype?,
            shape: shape?,
            shape_span,
            layout: match layout {
                Some(l) => Some(l?),
                None => None,
            },
            envelope,
            stock,
        })
    }

    fn growth(&mut self, node: &Node) -> Option<Vec<AxisGrowth>> {
        let help = "growth maps each clock axis to a fixed extent (`step: n_steps`) or to `{from: .., by: .., call: ..}`";
        let entries = self.entries(node, "`growth`", help)?;
        let mut out = Vec::new();
        let mut ok = true;
        for (_, k, v) in entries {
            let Some(axis) = self.ident(k, "a clock axis") else {
                ok = false;
                continue;
            };
            let growth = match &v.kind {
                NodeKind::Map(_) => {
                    let what = format!("growth of axis `{}`", axis.value);
                    let Some(f) = self.fields(v, &what, k.span, GROWS_KEYS, &["from", "by"]) else {
                        ok = false;
                        continue;
                    };
                    let from = f.get("from").and_then(|n| self.expr(n));
                    let by = f.get("by").and_then(|n| self.expr(n));
                    let call = f.get("call").and_then(|n| self.expr(n));
                    if f.get("call").is_some() && call.is_none() {
                        ok = false;
                    }
                    let advances = self.advances(&f);
                    match (from, by, advances) {
                        (Some(from), Some(by), Some(advances)) => {
                            (Growth::Grows { from, by, call }, advances)
                        }
                        _ => {
                            ok = false;
                            continue;
                        }
                    }
                }
                _ => match self.expr(v) {
                    Some(e) => (Growth::Fixed(e), Advances::default()),
                    None => {
                        ok = false;
                        continue;
                    }
                },
            };
            let (growth, advances) = growth;
            out.push(AxisGrowth {
                span: k.span.to(v.span),
                axis,
                growth,
                advances,
            });
        }
        ok.then_some(out)
    }

    fn retention(&mut self, node: &Node) -> Option<Spanned<Retention>> {
        let help = "retention is `pinned`, `none` (grows for the whole session), `{ring: CAPACITY}`, `{window: SIZE}` (optionally `steady: true`) or `{prompt: P, retained: R, order: prepend|append}` (optionally `keep: {head: H, tail: T}`)";
        if let NodeKind::Scalar { text, .. } = &node.kind {
            if text == "pinned" {
                return Some(Spanned::new(Retention::Pinned, node.span));
            }
            if text == "none" {
                return Some(Spanned::new(Retention::Unbounded, node.span));
            }
            self.diags.push(
                Diagnostic::error(
                    Code::BadValue,
                    node.span,
                    format!("`{}` is not a retention policy", clip(text)),
                )
                .label("unknown retention policy")
                .help(help),
            );
            return None;
        }
        let entries = self.entries(node, "`retention`", help)?;
        let keys: Vec<&str> = entries.iter().map(|(k, _, _)| *k).collect();
        let owner = node.span;
        let r = if keys.contains(&"ring") {
            let f = self.fields(node, "a ring retention", owner, &["ring"], &["ring"])?;
            Retention::Ring {
                capacity: self.expr(f.get("ring")?)?,
            }
        } else if keys.contains(&"window") {
            let f = self.fields(
                node,
                "a window retention",
                owner,
                &["window", "steady"],
                &["window"],
            )?;
            let size = self.expr(f.get("window")?);
            let steady = match f.get("steady") {
                Some(n) => self.bool(n, "`steady`").map(|b| b.value),
                None => Some(false),
            };
            Retention::Window {
                size: size?,
                steady: steady?,
            }
        } else if keys.contains(&"prompt") || keys.contains(&"retained") {
            let f = self.fields(
                node,
                "a prompt + history retention",
                owner,
                &["prompt", "retained", "order", "keep"],
                &["prompt", "retained", "order"],
            )?;
            let prompt = f.get("prompt").and_then(|n| self.expr(n));
            let retained = f.get("retained").and_then(|n| self.expr(n));
            let order = f.get("order").and_then(|n| {
                self.word(
                    n,
                    "cache order",
                    &[
                        ("prepend", CacheOrder::Prepend),
                        ("append", CacheOrder::Append),
                    ],
                )
            });
            let keep = match f.get("keep") {
                Some(n) => Some(self.keep(n)?),
                None => None,
            };
            Retention::PromptHistory {
                prompt: prompt?,
                retained: retained?,
                order: order?.value,
                keep,
            }
        } else {
            self.diags.push(
                Diagnostic::error(Code::BadValue, node.span, "retention policy not recognized")
                    .label("expected `ring`, `window` or `prompt` + `retained`")
                    .help(help),
            );
            return None;
        };
        Some(Spanned::new(r, node.span))
    }

    /// `keep: {head: H, tail: T}`.
    fn keep(&mut self, node: &Node) -> Option<Keep> {
        let f = self.fields(node, "`keep`", node.span, KEEP_KEYS, KEEP_KEYS)?;
        let head = f.get("head").and_then(|n| self.expr(n));
        let tail = f.get("tail").and_then(|n| self.expr(n));
        Some(Keep {
            head: head?,
            tail: tail?,
            span: node.span,
        })
    }

    fn stock(&mut self, node: &Node) -> Option<Vec<StockConstant>> {
        match &node.kind {
            NodeKind::Seq(_) => {
                let extents = self.expr_list(node, "stock extents per clock axis")?;
                Some(vec![StockConstant {
                    name: Spanned::new("stock".into(), node.span),
                    extents,
                    span: node.span,
                }])
            }
            NodeKind::Map(_) => {
                let help =
                    "stock is a list of extents per clock axis, or a map from names to such lists";
                let entries = self.entries(node, "`stock`", help)?;
                let mut out = Vec::new();
                let mut ok = true;
                for (_, k, v) in entries {
                    let name = self.ident(k, "a stock constant name");
                    let extents = self.expr_list(v, "stock extents per clock axis");
                    match (name, extents) {
                        (Some(name), Some(extents)) => out.push(StockConstant {
                            name,
                            extents,
                            span: k.span.to(v.span),
                        }),
                        _ => ok = false,
                    }
                }
                ok.then_some(out)
            }
            _ => {
                self.wrong_type(
                    node,
                    "a list of extents or a map of named lists",
                    "write `stock: [16, 1000]` (one extent per clock axis) or `stock: {envelope: [500], largest_bucket: [1000]}`",
                );
                None
            }
        }
    }

    fn constants(&mut self, node: &Node) -> Vec<Constant> {
        let help = "constants map a name to `{dtype, shape, placement}`";
        let Some(entries) = self.entries(node, "`constants`", help) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (_, k, v) in entries {
            let Some(name) = self.ident(k, "a constant name") else {
                continue;
            };
            let what = format!("constant `{}`", name.value);
            let Some(f) = self.fields(v, &what, k.span, CONSTANT_KEYS, &["dtype", "shape"]) else {
                continue;
            };
            let doc = f.get("doc").and_then(|n| self.string(n));
            let dtype = f.get("dtype").and_then(|n| self.dtype(n));
            let shape = f
                .get("shape")
                .and_then(|n| self.expr_list(n, "constant shape"));
            let placement = match f.get("placement") {
                Some(n) => self.placement(n),
                None => Some(Spanned::new(Placement::Device, k.span)),
            };
            if let (Some(dtype), Some(shape), Some(placement)) = (dtype, shape, placement) {
                out.push(Constant {
                    span: k.span.to(f.span),
                    name,
                    doc,
                    dtype,
                    shape,
                    placement,
                });
            }
        }
        out
    }

    fn callables(&mut self, node: &Node) -> Vec<Callable> {
        let help =
            "callables map a name to `{granularity, admit, effects, query, inputs, writes, ...}`";
        self.named(node, "`callables`", help, Self::callable)
    }

    fn callable(&mut self, k: &Node, v: &Node) -> Option<Callable> {
        let name = self.ident(k, "a callable name")?;
        let what = format!("callable `{}`", name.value);
        let f = self.fields(
            v,
            &what,
            k.span,
            CALLABLE_KEYS,
            &["granularity", "effects", "query", "inputs"],
        )?;
        let doc = f.get("doc").and_then(|n| self.string(n));
        let granularity = f.get("granularity").and_then(|n| {
            self.word(
                n,
                "capture granularity",
                &[("step", Granularity::Step), ("chunk", Granularity::Chunk)],
            )
        });
        let loop_clock = f.get("loop").and_then(|n| self.ident(n, "a clock name"));
        let loop_ok = f.get("loop").is_none() || loop_clock.is_some();
        let admit = f.get("admit").and_then(|n| {
            let NodeKind::Scalar { text, .. } = &n.kind else {
                self.wrong_type(
                    n,
                    "an admission predicate",
                    "write a predicate like `f <= f_chunk`",
                );
                return None;
            };
            let text = text.clone();
            let mapped = self.text_base(n, &text).is_some();
            let mut p = self.with_base(n, &text, expr::parse_predicate)?;
            p.span = n.span;
            if !mapped {
                p.var.span = n.span;
                for (_, e) in &mut p.clauses {
                    Self::fix_spans(e, n.span);
                }
            }
            Some(p)
        });
        let admit_ok = f.get("admit").is_none() || admit.is_some();
        let effects = f.get("effects").and_then(|n| self.effects(n));
        let query = f.get("query").and_then(|n| {
            self.word(
                n,
                "query length",
                &[
                    ("fixed", QueryLength::Fixed),
                    ("traffic", QueryLength::Traffic),
                ],
            )
        });
        let phases = match f.get("phases") {
            Some(n) => self.phases(n, &name.value),
            None => Some(Vec::new()),
        };
        let specialize = f.get("specialize").map(|n| self.specialize(n));
        let configs_ok = f.get("configs").is_none_or(|n| self.configs_replaced(n));
        let inputs = f.get("inputs").and_then(|n| self.inputs(n));
        let reads = match f.get("reads") {
            Some(n) => self.ident_list(n, "a region name"),
            None => Some(Vec::new()),
        };
        let writes = match f.get("writes") {
            Some(n) => self.ident_list(n, "a region name"),
            None => Some(Vec::new()),
        };
        let batch = self.batch(f.get("batch"), f.get("row_copies"), &name.value);
        if !(loop_ok && admit_ok && configs_ok) {
            return None;
        }
        let specialize = match specialize {
            Some(s) => Some(s?),
            None => None,
        };
        Some(Callable {
            span: k.span.to(f.span),
            name,
            doc,
            granularity: granularity?,
            loop_clock,
            admit,
            effects: effects?,
            query: query?,
            phases: phases?,
            specialize,
            inputs: inputs?,
            reads: reads?,
            writes: writes?,
            batch: batch?,
        })
    }

    fn inputs(&mut self, node: &Node) -> Option<Vec<TensorArg>> {
        let help = "inputs map an argument name to `{region: R}`, `{constant: C}` or `{dtype: D, shape: [..]}`";
        let entries = self.entries(node, "`inputs`", help)?;
        let mut out = Vec::new();
        let mut ok = true;
        for (_, k, v) in entries {
            let Some(name) = self.ident(k, "an argument name") else {
                ok = false;
                continue;
            };
            let what = format!("input `{}`", name.value);
            let Some(f) = self.fields(v, &what, k.span, INPUT_KEYS, &[]) else {
                ok = false;
                continue;
            };
            let alias = f.get("alias").and_then(|n| self.bool(n, "`alias`"));
            if f.get("alias").is_some() && alias.is_none() {
                ok = false;
            }
            let source = match (
                f.get("region"),
                f.get("constant"),
                f.get("dtype"),
                f.get("shape"),
            ) {
                (Some(r), None, None, None) => {
                    self.ident(r, "a region name").map(ArgSource::Region)
                }
                (None, Some(c), None, None) => {
                    self.ident(c, "a constant name").map(ArgSource::Constant)
                }
                (None, None, Some(d), Some(s)) => {
                    let dtype = self.dtype(d);
                    let shape = self.expr_list(s, "argument shape");
                    match (dtype, shape) {
                        (Some(dtype), Some(shape)) => Some(ArgSource::Tensor { dtype, shape }),
                        _ => None,
                    }
                }
                _ => {
                    self.diags.push(
                        Diagnostic::error(
                            Code::Inconsistent,
                            k.span,
                            format!("{what} must name exactly one source"),
                        )
                        .label("ambiguous or missing source")
                        .help("write `{region: NAME}`, `{constant: NAME}` or `{dtype: f32, shape: [..]}` (dtype and shape together)"),
                    );
                    None
                }
            };
            let view = match f.get("view") {
                Some(n) => {
                    let on_region = matches!(source, Some(ArgSource::Region(_)));
                    match self.view(n, &what, on_region) {
                        Some(v) => Some(v),
                        None => {
                            ok = false;
                            continue;
                        }
                    }
                }
                None => None,
            };
            match source {
                Some(source) => out.push(TensorArg {
                    span: k.span.to(f.span),
                    name,
                    source,
                    alias,
                    view,
                }),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}

fn key_hint(key: &str) -> &'static str {
    match key {
        "family" => "the model family, e.g. `family: token2wav`",
        "clocks" => "e.g. `clocks: {token: base, frame: 2 per token}`",
        "quantities" => "named integers, e.g. `quantities: {f_chunk: 50}`",
        "regions" => "one region contract per state region",
        "callables" => "the callables to capture",
        "clock" => "the region's native clock, e.g. `clock: [step, frame]`",
        "retention" => "e.g. `retention: {ring: 3000}` or `retention: pinned`",
        "lifetime" => "one of operator, iteration, unit, turn, session, process",
        "mutability" => "one of immutable, copy_on_write, mutable, scratch",
        "placement" => "one of arena, device, host",
        "dtype" => "one of f32, f16, bf16, i32, i64, u8, bool",
        "shape" => "per-tick element shape, e.g. `shape: [16, 2, 8, 128]`",
        "from" => "the extent before the first advance",
        "by" => "the advance per invocation (stride s_r)",
        "granularity" => "`step` or `chunk`",
        "effects" => "`none`, `device_rng`, `host_rng` or a list such as `[device_rng, host_rng]`",
        "query" => "`fixed` (set by the clocks) or `traffic`",
        "inputs" => "the tensor arguments, in call order",
        "ring" => "the ring capacity",
        "window" => "the window size",
        "prompt" => "frames of prompt kept",
        "retained" => "newest frames kept",
        "order" => "`prepend` or `append`",
        "head" => "frames kept at the start of the storage order, e.g. `head: f_prompt`",
        "tail" => "frames kept at the end of the storage order, e.g. `tail: f_retained`",
        _ => "see specs/ for examples",
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && s.len() <= 64
}

pub(super) fn clip(s: &str) -> String {
    let mut t: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        t.push('…');
    }
    t
}

/// Closest allowed word within edit distance 2 (or a prefix match).
pub(crate) fn suggest<'a>(word: &str, options: &[&'a str]) -> Option<&'a str> {
    if word.len() > 64 {
        return None;
    }
    let mut best: Option<(usize, &'a str)> = None;
    for o in options {
        let d = levenshtein(word, o);
        let limit = if o.len() <= 4 { 1 } else { 2 };
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, o));
        }
    }
    best.map(|(_, o)| o)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}
