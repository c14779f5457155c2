//! The typed error of the ops and their views.

use std::fmt;

/// Why an op (or a view method) refused: it names the op, the operand, what was expected and
/// what was found. Nothing was queued when an op returns one of these, except
/// [`OpError::Backend`], which the backend returns for the one operation it refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpError {
    /// An operand does not have the shape the op needs.
    Shape {
        op: &'static str,
        view: &'static str,
        expected: String,
        actual: Vec<usize>,
    },
    /// An operand's layout is not one the kernel addresses (inner stride, packed rows...).
    Layout {
        op: &'static str,
        view: &'static str,
        expected: String,
        strides: Vec<usize>,
    },
    /// A view reaches past the memory it was made from, or an index is out of range.
    Bounds {
        op: &'static str,
        view: &'static str,
        needed: usize,
        held: usize,
    },
    /// A range the op writes overlaps another operand.
    Overlap {
        op: &'static str,
        written: &'static str,
        other: &'static str,
    },
    /// A scalar argument is out of the op's range.
    Arg {
        op: &'static str,
        arg: &'static str,
        detail: String,
    },
    /// The backend refused the operation.
    Backend {
        op: &'static str,
        error: crate::Error,
    },
}

impl OpError {
    pub(crate) fn shape(
        op: &'static str,
        view: &'static str,
        expected: impl Into<String>,
        actual: &[usize],
    ) -> OpError {
        OpError::Shape {
            op,
            view,
            expected: expected.into(),
            actual: actual.to_vec(),
        }
    }

    pub(crate) fn layout(
        op: &'static str,
        view: &'static str,
        expected: impl Into<String>,
        strides: &[usize],
    ) -> OpError {
        OpError::Layout {
            op,
            view,
            expected: expected.into(),
            strides: strides.to_vec(),
        }
    }

    pub(crate) fn arg(op: &'static str, arg: &'static str, detail: impl Into<String>) -> OpError {
        OpError::Arg {
            op,
            arg,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpError::Shape {
                op,
                view,
                expected,
                actual,
            } => write!(f, "{op}: `{view}` has dims {actual:?}, expected {expected}"),
            OpError::Layout {
                op,
                view,
                expected,
                strides,
            } => write!(
                f,
                "{op}: `{view}` has strides {strides:?}, expected {expected}"
            ),
            OpError::Bounds {
                op,
                view,
                needed,
                held,
            } => write!(f, "{op}: `{view}` needs {needed} elements, holds {held}"),
            OpError::Overlap { op, written, other } => {
                write!(f, "{op}: written `{written}` overlaps `{other}`")
            }
            OpError::Arg { op, arg, detail } => write!(f, "{op}: argument `{arg}`: {detail}"),
            OpError::Backend { op, error } => write!(f, "{op}: {error}"),
        }
    }
}

impl std::error::Error for OpError {}
