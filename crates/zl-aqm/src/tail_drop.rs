//! Tail drop (drop-tail FIFO): admit while the buffer has room, drop otherwise
//! (docs/algorithms/tail-drop.md, the baseline every paper compares against).
//!
//! No parameters and no decision of its own: the capacity belongs to the queue, and the
//! bounds check that drops is [`Admission`](crate::Admission)'s, common to every policy.

use serde::{Deserialize, Serialize};

use crate::{Aqm, Arrival, Verdict};

/// Config for tail drop. It has no fields; the type exists so a config file can name the
/// policy (`kind = "tail-drop"`) and reject stray keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TailDropParams {}

impl TailDropParams {
    /// The policy (nothing to validate).
    pub fn build(&self) -> TailDrop {
        TailDrop
    }
}

/// Drop-tail: no state. Every arrival that fits is admitted; [`Admission`](crate::Admission)
/// tail-drops the rest.
#[derive(Clone, Copy, Debug, Default)]
pub struct TailDrop;

impl Aqm for TailDrop {
    #[inline]
    fn decide<R: rand::RngCore + ?Sized>(
        &mut self,
        _arrival: &Arrival<'_>,
        _rng: &mut R,
    ) -> Verdict {
        Verdict::Enqueue
    }
}
