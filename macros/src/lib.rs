//! dcc-macros: `#[native_clock(spec = "specs/x.yaml")]`, a thin shim over `dcc-compiler`.
//!
//! ```ignore
//! use dcc_runtime::contract::RegionBuf;
//!
//! #[dcc_macros::native_clock(spec = "specs/token2wav.yaml")]
//! struct Token2WavAdapter {
//!     #[region(carry)]
//!     carry: RegionBuf<f32, 131_727_360>,
//!     #[callable(flow)]
//!     flow: MyEngine,
//!     #[callable(vocoder, eager)] // bound, never captured
//!     vocoder: MyEngine,
//!     // ... every region and callable of the contract, each exactly once
//! }
//! ```
//!
//! The macro reads the spec (relative to `CARGO_MANIFEST_DIR`, else to the nearest ancestor
//! directory that has it), checks and derives it with `dcc_compiler`, embeds the module
//! `dcc compile` would generate in a hidden `__dcc_<struct>` module and implements
//! `dcc_runtime::contract::NativeClockAdapter` for the struct. Wrong bindings are compile errors
//! on the user's tokens; the struct itself is always emitted so secondary errors stay quiet.

use std::path::{Path, PathBuf};

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Fields, Ident, ItemStruct, LitStr};

use dcc_compiler::Checked;
use dcc_compiler::back::camel;
use dcc_compiler::ir::{DType, Verdict};

/// Binds an adapter struct to a native-clock contract. See the crate docs.
#[proc_macro_attribute]
pub fn native_clock(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr.into(), item.into()).into()
}

/// Collects errors; all of them are reported at once.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }
    fn tokens(&self) -> TokenStream2 {
        self.0
            .as_ref()
            .map(|e| e.to_compile_error())
            .unwrap_or_default()
    }
}

fn expand(attr: TokenStream2, item: TokenStream2) -> TokenStream2 {
    let mut errors = Errors::default();
    let mut item: ItemStruct = match syn::parse2(item.clone()) {
        Ok(s) => s,
        Err(_) => {
            let e = syn::Error::new(
                Span::call_site(),
                "#[native_clock] applies to a struct with named fields (the adapter)",
            );
            let ce = e.to_compile_error();
            return quote! { #ce #item };
        }
    };
    let bindings = take_bindings(&mut item, &mut errors);
    let spec_lit = match parse_args(attr) {
        Ok(l) => l,
        Err(e) => {
            errors.push(e);
            let ce = errors.tokens();
            return quote! { #item #ce };
        }
    };
    let Some(spec) = load_spec(&spec_lit, &mut errors) else {
        let ce = errors.tokens();
        return quote! { #item #ce };
    };
    let generated = emit(&item, &spec_lit, &spec, &bindings, &mut errors);
    let ce = errors.tokens();
    quote! { #item #generated #ce }
}

/// `spec = "specs/x.yaml"`.
fn parse_args(attr: TokenStream2) -> syn::Result<LitStr> {
    let mut spec: Option<LitStr> = None;
    let usage = "expected `#[native_clock(spec = \"specs/<family>.yaml\")]`";
    if attr.is_empty() {
        return Err(syn::Error::new(Span::call_site(), usage));
    }
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("spec") {
            if spec.is_some() {
                return Err(meta.error("`spec` given twice"));
            }
            spec = Some(meta.value()?.parse()?);
            Ok(())
        } else {
            Err(meta.error(format!("unknown argument; {usage}")))
        }
    });
    syn::parse::Parser::parse2(parser, attr.clone())?;
    spec.ok_or_else(|| syn::Error::new_spanned(attr, usage))
}

struct Loaded {
    checked: Checked,
    /// Absolute path of the spec file (for `include_bytes!`).
    abs: PathBuf,
}

/// Resolve against `CARGO_MANIFEST_DIR`, then its ancestors (a crate of a workspace may name
/// the workspace's `specs/x.yaml`).
fn resolve(rel: &str) -> Option<PathBuf> {
    let rel = Path::new(rel);
    if rel.is_absolute() {
        return rel.is_file().then(|| rel.to_path_buf());
    }
    let base = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    base.ancestors()
        .map(|dir| dir.join(rel))
        .find(|p| p.is_file())
}

fn load_spec(lit: &LitStr, errors: &mut Errors) -> Option<Loaded> {
    let rel = lit.value();
    let abs = match resolve(&rel) {
        Some(p) => p,
        None => {
            errors.push(syn::Error::new_spanned(
                lit,
                format!(
                    "cannot find spec `{rel}` in CARGO_MANIFEST_DIR or any of its parent directories"
                ),
            ));
            return None;
        }
    };
    // Bounded like `dcc check`: a regular file of at most `MAX_FILE_BYTES`, UTF-8.
    let text = match dcc_compiler::read_spec(&abs) {
        Ok(t) => t,
        Err(e) => {
            let message = match e {
                dcc_compiler::LoadError::Io { error, .. } => {
                    format!("cannot read spec `{rel}`: {error}")
                }
                dcc_compiler::LoadError::Spec(d) => format!(
                    "spec `{rel}` has errors; `dcc check {rel}` shows them:\n{}",
                    d.render()
                ),
            };
            errors.push(syn::Error::new_spanned(lit, message));
            return None;
        }
    };
    match dcc_compiler::check_source(&rel, &text) {
        Ok(checked) => Some(Loaded { checked, abs }),
        Err(d) => {
            errors.push(syn::Error::new_spanned(
                lit,
                format!(
                    "spec `{rel}` has errors; `dcc check {rel}` shows them:\n{}",
                    d.render()
                ),
            ));
            None
        }
    }
}

#[derive(Copy, Clone, PartialEq, Eq)]
enum Kind {
    Region,
    Callable,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Region => "region",
            Kind::Callable => "callable",
        }
    }
}

struct Binding {
    kind: Kind,
    field: Ident,
    ty: syn::Type,
    /// The contract name as written (`carry`).
    name: Ident,
    /// `#[callable(name, eager)]`.
    eager: bool,
}

/// Remove `#[region(..)]` / `#[callable(..)]` from the fields (they are not real attributes)
/// and collect them.
fn take_bindings(item: &mut ItemStruct, errors: &mut Errors) -> Vec<Binding> {
    let mut out = Vec::new();
    let fields = match &mut item.fields {
        Fields::Named(f) => &mut f.named,
        other => {
            errors.push(syn::Error::new(
                other.span(),
                "#[native_clock] needs named fields: `#[region(name)] field: RegionBuf<T, N>`",
            ));
            return out;
        }
    };
    for field in fields.iter_mut() {
        let mut seen: Option<Span> = None;
        let mut keep = Vec::new();
        for attr in std::mem::take(&mut field.attrs) {
            let kind = if attr.path().is_ident("region") {
                Kind::Region
            } else if attr.path().is_ident("callable") {
                Kind::Callable
            } else {
                keep.push(attr);
                continue;
            };
            if seen.is_some() {
                errors.push(syn::Error::new_spanned(
                    &attr,
                    "a field binds one region or callable; this field is already bound",
                ));
                continue;
            }
            seen = Some(attr.span());
            match parse_binding(&attr, kind) {
                Ok((name, eager)) => {
                    if let Some(field_ident) = field.ident.clone() {
                        out.push(Binding {
                            kind,
                            field: field_ident,
                            ty: field.ty.clone(),
                            name,
                            eager,
                        });
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        field.attrs = keep;
    }
    out
}

fn parse_binding(attr: &syn::Attribute, kind: Kind) -> syn::Result<(Ident, bool)> {
    let usage = match kind {
        Kind::Region => "expected `#[region(name)]`",
        Kind::Callable => "expected `#[callable(name)]` or `#[callable(name, eager)]`",
    };
    let list = attr
        .meta
        .require_list()
        .map_err(|_| syn::Error::new_spanned(attr, usage))?;
    let mut name: Option<Ident> = None;
    let mut eager = false;
    list.parse_nested_meta(|meta| {
        let Some(id) = meta.path.get_ident() else {
            return Err(meta.error(usage));
        };
        if name.is_none() {
            name = Some(id.clone());
            Ok(())
        } else if kind == Kind::Callable && id == "eager" && !eager {
            eager = true;
            Ok(())
        } else {
            Err(meta.error(usage))
        }
    })?;
    name.map(|n| (n, eager))
        .ok_or_else(|| syn::Error::new_spanned(attr, usage))
}

/// The closest of `names` to `name` (Levenshtein), if close enough to be a misspelling.
fn closest<'a>(name: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .map(|n| (strsim::levenshtein(name, n), n))
        .filter(|(d, n)| *d <= (n.len().max(name.len()) / 3).max(2))
        .min_by_key(|(d, n)| (*d, *n))
        .map(|(_, n)| n)
}

fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Elements of a region with these dims; `None` on overflow (a proc macro must not panic).
fn elems_of(dims: &[u64]) -> Option<u64> {
    dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
}

fn elem_rust(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "dcc_runtime::contract::F16",
        DType::BF16 => "dcc_runtime::contract::Bf16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U8 => "u8",
        DType::Bool => "bool",
    }
}

fn dtype_variant(d: DType) -> Ident {
    Ident::new(
        match d {
            DType::F32 => "F32",
            DType::F64 => "F64",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::I32 => "I32",
            DType::I64 => "I64",
            DType::U8 => "U8",
            DType::Bool => "Bool",
        },
        Span::call_site(),
    )
}

/// `::core::panic!(msg)` whose invocation spans the whole of `tokens` (first token to last), so
/// const-evaluation errors underline the user's entire field type, not just its first token.
fn spanned_panic(tokens: &impl quote::ToTokens, msg: &str) -> TokenStream2 {
    use proc_macro2::{Delimiter, Group, Punct, Spacing, TokenTree};
    let stream = tokens.to_token_stream();
    let mut iter = stream.into_iter();
    let first = iter
        .next()
        .map(|t| t.span())
        .unwrap_or_else(Span::call_site);
    let last = iter.last().map(|t| t.span()).unwrap_or(first);
    let mut colon1 = Punct::new(':', Spacing::Joint);
    colon1.set_span(first);
    let mut colon2 = Punct::new(':', Spacing::Alone);
    colon2.set_span(first);
    let core = Ident::new("core", first);
    let mut colon3 = Punct::new(':', Spacing::Joint);
    colon3.set_span(first);
    let mut colon4 = Punct::new(':', Spacing::Alone);
    colon4.set_span(first);
    let panic = Ident::new("panic", first);
    let mut bang = Punct::new('!', Spacing::Alone);
    bang.set_span(first);
    // `panic!("{}", msg)`: the message may contain braces (a const-generic `{ expr }`).
    let mut fmt = proc_macro2::Literal::string("{}");
    fmt.set_span(first);
    let mut comma = Punct::new(',', Spacing::Alone);
    comma.set_span(first);
    let mut lit = proc_macro2::Literal::string(msg);
    lit.set_span(first);
    let args: TokenStream2 = [
        TokenTree::Literal(fmt),
        TokenTree::Punct(comma),
        TokenTree::Literal(lit),
    ]
    .into_iter()
    .collect();
    let mut group = Group::new(Delimiter::Parenthesis, args);
    group.set_span(last);
    [
        TokenTree::Punct(colon1),
        TokenTree::Punct(colon2),
        TokenTree::Ident(core),
        TokenTree::Punct(colon3),
        TokenTree::Punct(colon4),
        TokenTree::Ident(panic),
        TokenTree::Punct(bang),
        TokenTree::Group(group),
    ]
    .into_iter()
    .collect()
}

fn emit(
    item: &ItemStruct,
    lit: &LitStr,
    spec: &Loaded,
    bindings: &[Binding],
    errors: &mut Errors,
) -> TokenStream2 {
    let checked = &spec.checked;
    let d = &checked.derived;
    let family = checked.family().to_string();
    let rel = lit.value();
    let contract = format!("contract `{family}` ({rel})");

    // The module `dcc compile` generates, embedded.
    let body = match dcc_compiler::back::generate_body(checked, &rel) {
        Ok(b) => b,
        Err(e) => {
            errors.push(syn::Error::new_spanned(lit, format!("{rel}: {e}")));
            return TokenStream2::new();
        }
    };
    let body: TokenStream2 = match body.parse() {
        Ok(t) => t,
        Err(e) => {
            errors.push(syn::Error::new_spanned(
                lit,
                format!("internal error: generated code does not lex: {e}"),
            ));
            return TokenStream2::new();
        }
    };
    let module = format_ident!("__dcc_{}", snake(&item.ident.to_string()));
    let abs = spec.abs.display().to_string();

    let region_names: Vec<&str> = d.regions.iter().map(|r| r.name.as_str()).collect();
    let callable_names: Vec<&str> = d.callables.iter().map(|c| c.name.as_str()).collect();

    let mut region_fields = Vec::new();
    let mut callable_fields = Vec::new();
    let mut checks = Vec::new();
    let mut bound: Vec<(Kind, String, String)> = Vec::new(); // (kind, name, field)

    // Names an erroneous binding most likely meant: their "not bound" errors would be noise.
    let mut meant: Vec<(Kind, String)> = Vec::new();
    for b in bindings {
        let name = b.name.to_string();
        let (own, other, other_kind) = match b.kind {
            Kind::Region => (&region_names, &callable_names, Kind::Callable),
            Kind::Callable => (&callable_names, &region_names, Kind::Region),
        };
        if !own.contains(&name.as_str()) {
            if other.contains(&name.as_str()) {
                meant.push((other_kind, name.clone()));
            } else if let Some(s) = closest(&name, own.iter().copied()) {
                meant.push((b.kind, s.to_string()));
            }
            let msg = if other.contains(&name.as_str()) {
                format!(
                    "`{name}` is a {} of {contract}, not a {}: use `#[{}({name})]`",
                    other_kind.word(),
                    b.kind.word(),
                    other_kind.word()
                )
            } else {
                let list = own
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                match closest(&name, own.iter().copied()) {
                    Some(s) => format!(
                        "no {} `{name}` in {contract}; did you mean `{s}`? (the {}s are {list})",
                        b.kind.word(),
                        b.kind.word()
                    ),
                    None => format!(
                        "no {} `{name}` in {contract}; the {}s are {list}",
                        b.kind.word(),
                        b.kind.word()
                    ),
                }
            };
            errors.push(syn::Error::new_spanned(&b.name, msg));
            continue;
        }
        if let Some((_, _, first)) = bound.iter().find(|(k, n, _)| *k == b.kind && *n == name) {
            errors.push(syn::Error::new_spanned(
                &b.name,
                format!(
                    "{} `{name}` is bound twice: field `{first}` already binds it (one field per {})",
                    b.kind.word(),
                    b.kind.word()
                ),
            ));
            continue;
        }
        bound.push((b.kind, name.clone(), b.field.to_string()));
        let field_str = b.field.to_string();
        let ty_name = format_ident!("{}", camel(&name));
        match b.kind {
            Kind::Region => {
                let Some(r) = d.region(&name) else { continue };
                let ty = &b.ty;
                let ty_text = quote!(#ty)
                    .to_string()
                    .replace(" < ", "<")
                    .replace(" >", ">")
                    .replace(" ,", ",");
                let Some(elems) = elems_of(&r.dims) else {
                    errors.push(syn::Error::new_spanned(
                        &b.name,
                        format!(
                            "region `{name}` of {contract}: {:?} elements overflow u64",
                            r.dims
                        ),
                    ));
                    continue;
                };
                let dt = dtype_variant(r.dtype);
                let elem_msg = format!(
                    "field `{field_str}: {ty_text}` cannot hold region `{name}`: {contract} declares `dtype: {}`, so the field needs element type `{}` (`RegionBuf<{}, {elems}>`)",
                    r.dtype.name(),
                    elem_rust(r.dtype),
                    elem_rust(r.dtype)
                );
                let size_msg = format!(
                    "field `{field_str}: {ty_text}` cannot hold region `{name}`: {contract} sizes it at {elems} elements (dims {:?}; attended extent {}), so the field needs `RegionBuf<{}, {elems}>`",
                    r.dims,
                    dcc_compiler::back::explain(&r.attended_extent),
                    elem_rust(r.dtype)
                );
                let span = ty.span();
                let elem_panic = spanned_panic(ty, &elem_msg);
                let size_panic = spanned_panic(ty, &size_msg);
                checks.push(quote_spanned! {span=>
                    const _: () = {
                        if (<<#ty as ::dcc_runtime::contract::RegionField>::Elem
                            as ::dcc_runtime::contract::Element>::DTYPE as u8)
                            != (::dcc_runtime::contract::DType::#dt as u8)
                        {
                            #elem_panic
                        }
                        if <#ty as ::dcc_runtime::contract::RegionField>::ELEMS != #elems as usize {
                            #size_panic
                        }
                    };
                });
                region_fields.push(quote! {
                    ::dcc_runtime::contract::RegionBinding {
                        field: #field_str,
                        region: &#module::#ty_name::INFO,
                    }
                });
            }
            Kind::Callable => {
                let Some(c) = d.callable(&name) else { continue };
                if !b.eager && c.verdict != Verdict::Captured {
                    errors.push(syn::Error::new_spanned(
                        &b.name,
                        format!(
                            "callable `{name}` cannot be captured: {contract} gives it the verdict `{}` ({}). Bind it with `#[callable({name}, eager)]` to run it eagerly",
                            c.verdict.label(),
                            c.reason
                        ),
                    ));
                    continue;
                }
                let capture = !b.eager;
                callable_fields.push(quote! {
                    ::dcc_runtime::contract::CallableBinding {
                        field: #field_str,
                        callable: &#module::#ty_name::INFO,
                        capture: #capture,
                    }
                });
            }
        }
    }

    // Missing bindings: every region and callable of the contract, exactly once.
    for (kind, names) in [
        (Kind::Region, &region_names),
        (Kind::Callable, &callable_names),
    ] {
        for n in names.iter() {
            if bindings.iter().any(|b| b.kind == kind && b.name == *n)
                || meant.iter().any(|(k, m)| *k == kind && m == n)
            {
                continue;
            }
            let hint = match kind {
                Kind::Region => {
                    let r = d.region(n);
                    let (elem, elems) = r
                        .map(|r| (elem_rust(r.dtype), elems_of(&r.dims).unwrap_or(0)))
                        .unwrap_or(("f32", 0));
                    format!(
                        "`#[region({n})] {n}: dcc_runtime::contract::RegionBuf<{elem}, {elems}>`"
                    )
                }
                Kind::Callable => {
                    let captured = d
                        .callable(n)
                        .is_some_and(|c| c.verdict == Verdict::Captured);
                    if captured {
                        format!("`#[callable({n})] {n}: ...`")
                    } else {
                        format!("`#[callable({n}, eager)] {n}: ...` (it is out of scope)")
                    }
                }
            };
            errors.push(syn::Error::new_spanned(
                &item.ident,
                format!(
                    "{} `{n}` of {contract} is not bound to a field; add {hint}",
                    kind.word()
                ),
            ));
        }
    }

    let ident = &item.ident;
    let (impl_g, ty_g, where_c) = item.generics.split_for_impl();
    quote! {
        #[doc(hidden)]
        #[allow(dead_code, unused_imports, clippy::all)]
        pub mod #module {
            const _: &[u8] = ::core::include_bytes!(#abs);
            #body
        }

        #(#checks)*

        impl #impl_g ::dcc_runtime::contract::NativeClockAdapter for #ident #ty_g #where_c {
            type Contract = #module::Contract;
            const SPEC_PATH: &'static str = #rel;
            const REGION_FIELDS: &'static [::dcc_runtime::contract::RegionBinding] = &[#(#region_fields),*];
            const CALLABLE_FIELDS: &'static [::dcc_runtime::contract::CallableBinding] = &[#(#callable_fields),*];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_names() {
        let names = [
            "carry",
            "solver_workspace",
            "attention_mask",
            "conformer_cache",
        ];
        assert_eq!(closest("cary", names), Some("carry"));
        assert_eq!(closest("solver_worksapce", names), Some("solver_workspace"));
        assert_eq!(closest("zzzzzz", names), None);
        assert_eq!(snake("Token2WavAdapter"), "token2_wav_adapter");
        assert_eq!(camel("solver_workspace"), "SolverWorkspace");
    }
}
