//! `torch.nn.Embedding`.

use dcc_runtime::backend::DeviceBuffer;

use super::{Ctx, LoadError, Loader, OpError, Tensor, ops};

/// A token embedding table `[vocab, dim]`.
#[derive(Debug)]
pub struct Embedding {
    table: DeviceBuffer,
    vocab: usize,
    dim: usize,
}

impl Embedding {
    /// `name` `[vocab, dim]`.
    pub fn load(ld: &Loader<'_>, name: &str, vocab: usize, dim: usize) -> Result<Self, LoadError> {
        Ok(Embedding {
            table: ld.tensor(name, &[vocab, dim])?,
            vocab,
            dim,
        })
    }

    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// `out[t] = table[ids[t]]`, `out` `[n, dim]` ([`ops::embedding`]; ids must be below
    /// `vocab`, an id past it gives a zero row).
    pub fn forward(
        &self,
        cx: &Ctx<'_>,
        ids: Tensor<'_, u32>,
        out: Tensor<'_>,
    ) -> Result<(), OpError> {
        let table = Tensor::of(&self.table)?.view(&[self.vocab, self.dim])?;
        ops::embedding(cx, out, ids, table)
    }
}
