//! Decoding with the host one step behind the device.
//!
//! A decode step on CUDA is one graph launch, and the host needs its picked id only to hand it
//! on (print it, test it against the stop ids). Waiting for each id before launching the next
//! step leaves the device idle for that round trip: the host waking up, the id's copy, the next
//! launch. [`Qwen3::decode_run`] keeps the next step queued while the host takes the current
//! id, and undoes that step when the caller stops.

use bonsai_kernels::ops::sample_top_k::Xoshiro256;

use super::{DevicePick, LogitRows, PlanKey, Qwen3, Qwen3State};
use crate::backend::Backend;
use crate::ModelError;

impl<B: Backend> Qwen3<B> {
    /// Runs up to `max_steps` decode steps, each as [`Self::decode_step`], and hands every picked
    /// id to `on_token`, which returns whether to go on. Returns the number of ids handed over;
    /// the state afterwards is the state after that many `decode_step` calls.
    ///
    /// Where the model may queue steps ([`Self::decode_queue_depth`] > 1), steps are launched that
    /// many ahead of the id the host waits for. When `on_token` stops the run (or
    /// fails), the steps still queued are undone once they have run: the position goes back, the
    /// last handed-over id goes back into the token buffer (the next input, as after
    /// `decode_step`), and a sampling pick's generator is set to its state after the handed-over
    /// draws (the sampling kernel always draws once per step).
    pub fn decode_run(
        &self,
        state: &mut Qwen3State<B>,
        pick: DevicePick,
        max_steps: usize,
        mut on_token: impl FnMut(u32) -> Result<bool, ModelError>,
    ) -> Result<usize, ModelError> {
        let depth = self.decode_queue_depth();
        if depth == 1 {
            for handed in 0..max_steps {
                if !on_token(self.decode_step(state, pick)?)? {
                    return Ok(handed + 1);
                }
            }
            return Ok(max_steps);
        }
        let rng_before = match pick {
            DevicePick::Sample(_) => Some(self.sampler_rng(state)?),
            DevicePick::Greedy => None,
            // Undoing queued steps would also have to rewind the sequence's own generator.
            DevicePick::PerSequence => {
                return Err(ModelError::Unsupported("decode_run with per-sequence picks (use launch_decode_batch)".into()))
            }
        };
        let (mut launched, mut handed, mut last) = (0usize, 0usize, None);
        let mut run = || -> Result<(), ModelError> {
            loop {
                while launched < max_steps && launched - handed < depth {
                    self.launch_decode_step(state, pick)?;
                    self.backend.post_tokens(&state.acts.tokens, 1, launched % depth)?;
                    launched += 1;
                }
                if handed == launched {
                    return Ok(());
                }
                let mut id = [0u32];
                self.backend.take_tokens(&state.acts.tokens, handed % depth, &mut id)?;
                let id = self.check_token(id[0])?;
                handed += 1;
                last = Some(id);
                if !on_token(id)? {
                    return Ok(());
                }
            }
        };
        let outcome = run();
        let undone = match launched > handed {
            true => self.undo_queued_steps(state, launched - handed, last, rng_before, handed),
            false => Ok(()),
        };
        // A failed run reports its own error, not one from the undo.
        outcome?;
        undone?;
        Ok(handed)
    }

    /// Waits for `queued` launched steps whose ids were not handed over and takes them back (see
    /// [`Self::decode_run`]).
    fn undo_queued_steps(
        &self,
        state: &mut Qwen3State<B>,
        queued: usize,
        last: Option<u32>,
        rng_before: Option<[u64; 4]>,
        handed: usize,
    ) -> Result<(), ModelError> {
        self.backend.synchronize()?;
        let n_past = state.n_past[0] - queued;
        self.rewind(state, n_past)?;
        if let Some(id) = last {
            self.set_next_token(state, id)?;
        }
        if let Some(rng) = rng_before {
            let mut rng = Xoshiro256::from_state(rng);
            for _ in 0..handed {
                rng.next_u64();
            }
            self.seed_sampler(state, rng.state())?;
        }
        Ok(())
    }
}

/// Batched decode steps with the host one step behind (the server's steady state): a step whose
/// input ids are the picks the previous step left on the device is launched before the host takes
/// the previous step's ids.
impl<B: Backend> Qwen3<B> {
    /// How many decode steps may be queued ahead of the id the host waits for (mailboxes
    /// `0..depth` of [`Self::launch_decode_batch`]): 1 where ops are synchronous, and for a model
    /// with recurrent (qwen35) layers, whose state cannot take back a step that ran (rewinding
    /// drops whole states only).
    pub fn decode_queue_depth(&self) -> usize {
        if self.hybrid_config().is_some() {
            return 1;
        }
        self.backend.decode_queue_depth().max(1)
    }

    /// Launches one decode step of the sequences `seqs` (increasing, one token each), or the
    /// batch `batch` when given (its ids written first): picks each sequence's next token with
    /// `pick` on the backend and queues a copy of the picks into `mailbox`, without waiting. With
    /// `batch` None the input ids are the ones already in the token buffer: the picks of the
    /// previous step, which must have run the same sequences in the same order.
    pub fn launch_decode_batch(
        &self,
        state: &mut Qwen3State<B>,
        seqs: &[usize],
        batch: Option<&[(usize, &[u32])]>,
        pick: DevicePick,
        mailbox: usize,
    ) -> Result<(), ModelError> {
        let key = match batch {
            Some(batch) => {
                if batch.len() != seqs.len() || batch.iter().zip(seqs).any(|((s, _), q)| s != q) {
                    return Err(ModelError::Unsupported("launch_decode_batch: the batch does not match its sequences".into()));
                }
                self.batch_key(state, batch, LogitRows::Last, Some(pick))?
            }
            None => PlanKey { batch: seqs.iter().map(|&s| (s, 1)).collect(), logits: LogitRows::Last, pick: Some(pick) },
        };
        self.run_plan(state, key)?;
        self.backend.post_tokens(&state.acts.tokens, seqs.len(), mailbox)?;
        Ok(())
    }

    /// The picks [`Self::launch_decode_batch`] queued into `mailbox` (`out.len()` = its
    /// sequences), once that step has run.
    pub fn take_decode_batch(&self, state: &Qwen3State<B>, mailbox: usize, out: &mut [u32]) -> Result<(), ModelError> {
        self.backend.take_tokens(&state.acts.tokens, mailbox, out)?;
        for id in out.iter() {
            self.check_token(*id)?;
        }
        Ok(())
    }
}
