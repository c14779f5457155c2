//! The catalog an engine keys on: the generated static table of a contract, or a table derived
//! from it at run time and owned by the engines that use it.
//!
//! A generated catalog (`CallableInfo::catalog`) is a `static` of [`Signature`]s whose slices are
//! all `&'static`. A caller that serves a callable under another storage than the contract's
//! (e.g. every region input staged and described by the compact layout a stock store really
//! allocates) derives its catalog at run time; that one is an [`OwnedSignature`] table behind an
//! `Arc`, freed when the last engine holding it is dropped, so building engines never leaks.
//!
//! Both read the same through [`SignatureRef`] / [`TensorSigRef`]: plain borrows of integers,
//! so the engine's per-call path (key, match, premises) neither allocates nor branches on where
//! the table lives beyond one match per access.

use std::borrow::Cow;
use std::sync::Arc;

use crate::contract::{DType, Signature, TensorSig};

/// One tensor argument of an owned catalog entry: the owned twin of [`TensorSig`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnedTensorSig {
    pub name: Cow<'static, str>,
    pub dims: Box<[usize]>,
    /// Element strides.
    pub strides: Box<[usize]>,
    pub dtype: DType,
    /// Contract-owned: aliased by pointer, never staged.
    pub aliased: bool,
}

impl From<&TensorSig> for OwnedTensorSig {
    fn from(t: &TensorSig) -> Self {
        OwnedTensorSig {
            name: Cow::Borrowed(t.name),
            dims: t.dims.into(),
            strides: t.strides.into(),
            dtype: t.dtype,
            aliased: t.aliased,
        }
    }
}

/// One entry of an owned catalog: the owned twin of [`Signature`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnedSignature {
    pub callable: Cow<'static, str>,
    /// Index of the catalog class within the callable.
    pub class: u16,
    /// Attended extent (frames) that specializes this class.
    pub attended: usize,
    pub inputs: Box<[OwnedTensorSig]>,
    /// Scalar arguments that specialize the class.
    pub scalars: Box<[i64]>,
}

impl From<&Signature> for OwnedSignature {
    fn from(s: &Signature) -> Self {
        OwnedSignature {
            callable: Cow::Borrowed(s.callable),
            class: s.class,
            attended: s.attended,
            inputs: s.inputs.iter().map(OwnedTensorSig::from).collect(),
            scalars: s.scalars.into(),
        }
    }
}

/// The signatures an engine keys on, indexed by class.
#[derive(Clone, Debug)]
pub enum Catalog {
    /// A generated catalog (`CallableInfo::catalog`).
    Static(&'static [Signature]),
    /// A catalog derived at run time, shared by the engines built from it.
    Owned(Arc<[OwnedSignature]>),
}

impl Catalog {
    /// Number of classes.
    pub fn len(&self) -> usize {
        match self {
            Catalog::Static(c) => c.len(),
            Catalog::Owned(c) => c.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The signature of class `class`.
    pub fn get(&self, class: usize) -> Option<SignatureRef<'_>> {
        match self {
            Catalog::Static(c) => c.get(class).map(SignatureRef::from),
            Catalog::Owned(c) => c.get(class).map(SignatureRef::from),
        }
    }

    /// Every signature, in class order (no allocation).
    pub fn iter(&self) -> CatalogIter<'_> {
        CatalogIter {
            catalog: self,
            next: 0,
        }
    }
}

/// The signatures of a [`Catalog`], in class order.
#[derive(Clone, Debug)]
pub struct CatalogIter<'a> {
    catalog: &'a Catalog,
    next: usize,
}

impl<'a> Iterator for CatalogIter<'a> {
    type Item = SignatureRef<'a>;

    fn next(&mut self) -> Option<SignatureRef<'a>> {
        let s = self.catalog.get(self.next)?;
        self.next += 1;
        Some(s)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.catalog.len().saturating_sub(self.next);
        (n, Some(n))
    }
}

impl ExactSizeIterator for CatalogIter<'_> {}

impl<'a> IntoIterator for &'a Catalog {
    type Item = SignatureRef<'a>;
    type IntoIter = CatalogIter<'a>;

    fn into_iter(self) -> CatalogIter<'a> {
        self.iter()
    }
}

impl From<&'static [Signature]> for Catalog {
    fn from(c: &'static [Signature]) -> Self {
        Catalog::Static(c)
    }
}

impl From<Vec<OwnedSignature>> for Catalog {
    fn from(c: Vec<OwnedSignature>) -> Self {
        Catalog::Owned(c.into())
    }
}

/// One catalog entry, wherever its table lives.
#[derive(Copy, Clone, Debug)]
pub struct SignatureRef<'a> {
    pub callable: &'a str,
    pub class: u16,
    pub attended: usize,
    pub inputs: TensorSigs<'a>,
    pub scalars: &'a [i64],
}

impl<'a> From<&'a Signature> for SignatureRef<'a> {
    fn from(s: &'a Signature) -> Self {
        SignatureRef {
            callable: s.callable,
            class: s.class,
            attended: s.attended,
            inputs: TensorSigs::Static(s.inputs),
            scalars: s.scalars,
        }
    }
}

impl<'a> From<&'a OwnedSignature> for SignatureRef<'a> {
    fn from(s: &'a OwnedSignature) -> Self {
        SignatureRef {
            callable: &s.callable,
            class: s.class,
            attended: s.attended,
            inputs: TensorSigs::Owned(&s.inputs),
            scalars: &s.scalars,
        }
    }
}

/// The tensor arguments of one catalog entry.
#[derive(Copy, Clone, Debug)]
pub enum TensorSigs<'a> {
    Static(&'a [TensorSig]),
    Owned(&'a [OwnedTensorSig]),
}

impl<'a> TensorSigs<'a> {
    pub fn len(&self) -> usize {
        match self {
            TensorSigs::Static(t) => t.len(),
            TensorSigs::Owned(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Argument `i`.
    pub fn get(&self, i: usize) -> Option<TensorSigRef<'a>> {
        match *self {
            TensorSigs::Static(t) => t.get(i).map(TensorSigRef::from),
            TensorSigs::Owned(t) => t.get(i).map(TensorSigRef::from),
        }
    }

    /// Every argument, in order (no allocation).
    pub fn iter(&self) -> TensorSigIter<'a> {
        TensorSigIter {
            sigs: *self,
            next: 0,
        }
    }
}

/// The arguments of a [`TensorSigs`], in order.
#[derive(Clone, Debug)]
pub struct TensorSigIter<'a> {
    sigs: TensorSigs<'a>,
    next: usize,
}

impl<'a> Iterator for TensorSigIter<'a> {
    type Item = TensorSigRef<'a>;

    fn next(&mut self) -> Option<TensorSigRef<'a>> {
        let t = self.sigs.get(self.next)?;
        self.next += 1;
        Some(t)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.sigs.len().saturating_sub(self.next);
        (n, Some(n))
    }
}

impl ExactSizeIterator for TensorSigIter<'_> {}

impl<'a> IntoIterator for TensorSigs<'a> {
    type Item = TensorSigRef<'a>;
    type IntoIter = TensorSigIter<'a>;

    fn into_iter(self) -> TensorSigIter<'a> {
        self.iter()
    }
}

/// One tensor argument of a catalog entry, wherever its table lives.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorSigRef<'a> {
    pub name: &'a str,
    pub dims: &'a [usize],
    /// Element strides.
    pub strides: &'a [usize],
    pub dtype: DType,
    /// Contract-owned: aliased by pointer, never staged.
    pub aliased: bool,
}

impl<'a> From<&'a TensorSig> for TensorSigRef<'a> {
    fn from(t: &'a TensorSig) -> Self {
        TensorSigRef {
            name: t.name,
            dims: t.dims,
            strides: t.strides,
            dtype: t.dtype,
            aliased: t.aliased,
        }
    }
}

impl<'a> From<&'a OwnedTensorSig> for TensorSigRef<'a> {
    fn from(t: &'a OwnedTensorSig) -> Self {
        TensorSigRef {
            name: &t.name,
            dims: &t.dims,
            strides: &t.strides,
            dtype: t.dtype,
            aliased: t.aliased,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SIGS: [Signature; 2] = [
        Signature {
            callable: "f",
            class: 0,
            attended: 3,
            inputs: &[
                TensorSig {
                    name: "x",
                    dims: &[2, 3],
                    strides: &[3, 1],
                    dtype: DType::F32,
                    aliased: false,
                },
                TensorSig {
                    name: "c",
                    dims: &[3],
                    strides: &[1],
                    dtype: DType::I32,
                    aliased: true,
                },
            ],
            scalars: &[3],
        },
        Signature {
            callable: "f",
            class: 1,
            attended: 4,
            inputs: &[],
            scalars: &[],
        },
    ];

    fn fields(s: SignatureRef<'_>) -> (String, u16, usize, Vec<TensorSigRef<'_>>, Vec<i64>) {
        (
            s.callable.to_string(),
            s.class,
            s.attended,
            s.inputs.iter().collect(),
            s.scalars.to_vec(),
        )
    }

    /// An owned copy of a generated catalog reads exactly as the generated one.
    #[test]
    fn owned_copy_reads_as_the_static_catalog() {
        let st = Catalog::Static(&SIGS);
        let owned: Catalog = SIGS
            .iter()
            .map(OwnedSignature::from)
            .collect::<Vec<_>>()
            .into();
        assert_eq!((st.len(), owned.len()), (2, 2));
        assert_eq!(st.iter().len(), 2);
        for (a, b) in st.iter().zip(&owned) {
            assert_eq!(fields(a), fields(b));
            assert_eq!(a.inputs.iter().len(), a.inputs.len());
        }
        assert!(st.get(2).is_none() && owned.get(2).is_none());
        let x = owned.get(0).and_then(|s| s.inputs.get(0)).unwrap();
        assert_eq!((x.name, x.dims, x.strides), ("x", &[2, 3][..], &[3, 1][..]));
        assert!(owned.get(0).unwrap().inputs.get(2).is_none());
    }
}
