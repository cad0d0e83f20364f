//! Which blocks of a state's KV pools are free, and how many sequences hold each one.
//!
//! A sequence holds the blocks its table names; a block of a shared prompt prefix is held by
//! every sequence that shares it and returns to the free list when the last one lets go. A held
//! block is written only by a sole holder ([`crate::Qwen3`] copies a shared block before a
//! sequence writes into it), so sharing never changes what another sequence reads.

/// The free list and each block's holder count.
#[derive(Clone, Debug)]
pub struct KvBlocks {
    holders: Vec<u32>,
    /// Free blocks; taken from the end, so the lowest ids go first.
    free: Vec<u32>,
}

impl KvBlocks {
    /// `blocks` blocks, all free.
    pub fn new(blocks: usize) -> Self {
        let ids = u32::try_from(blocks).expect("a KV pool of fewer than 2^32 blocks");
        Self { holders: vec![0; blocks], free: (0..ids).rev().collect() }
    }

    /// Blocks in the pools.
    pub fn total(&self) -> usize {
        self.holders.len()
    }

    /// Blocks no sequence holds.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// A free block, now held once; None when every block is held.
    pub fn take(&mut self) -> Option<u32> {
        let block = self.free.pop()?;
        self.holders[block as usize] = 1;
        Some(block)
    }

    /// One more holder of `block` (a sequence sharing it).
    pub fn share(&mut self, block: u32) {
        let holders = &mut self.holders[block as usize];
        assert!(*holders > 0, "sharing free KV block {block}");
        *holders += 1;
    }

    /// One holder of `block` lets go; the block is free once none is left.
    pub fn release(&mut self, block: u32) {
        let holders = &mut self.holders[block as usize];
        assert!(*holders > 0, "releasing free KV block {block}");
        *holders -= 1;
        if *holders == 0 {
            self.free.push(block);
        }
    }

    /// Whether more than one sequence holds `block`.
    pub fn is_shared(&self, block: u32) -> bool {
        self.holders[block as usize] > 1
    }
}

#[cfg(test)]
mod tests {
    use super::KvBlocks;

    #[test]
    fn blocks_come_back_when_their_last_holder_lets_go() {
        let mut blocks = KvBlocks::new(3);
        let (a, b, c) = (blocks.take().unwrap(), blocks.take().unwrap(), blocks.take().unwrap());
        assert_eq!((a, b, c), (0, 1, 2), "lowest first");
        assert_eq!(blocks.take(), None, "all held");
        blocks.share(b);
        assert!(blocks.is_shared(b) && !blocks.is_shared(a));
        blocks.release(b);
        assert_eq!(blocks.free(), 0, "one holder left");
        assert!(!blocks.is_shared(b));
        blocks.release(b);
        blocks.release(a);
        assert_eq!(blocks.free(), 2);
        assert_eq!(blocks.take(), Some(a), "the last freed first");
    }

    #[test]
    #[should_panic(expected = "releasing free KV block 0")]
    fn releasing_a_free_block_is_a_bug() {
        KvBlocks::new(1).release(0);
    }
}
