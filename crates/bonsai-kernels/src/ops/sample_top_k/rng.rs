//! The sampling PRNG: xoshiro256** (Blackman & Vigna) seeded by expanding a u64 through
//! splitmix64. sample_top_k.cu implements the same `next_u64` / `next_f64` on a device copy of
//! the state, so host and device draws agree bit for bit.

/// xoshiro256** state (never all zero).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xoshiro256 {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Random bits in an f64 draw (its mantissa).
const MANTISSA_BITS: u32 = 53;

impl Xoshiro256 {
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        // splitmix64 never yields four zero words in a row, so the state is never all-zero.
        Self { s: [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)] }
    }

    /// The raw state (to copy it to a device).
    pub fn state(&self) -> [u64; 4] {
        self.s
    }

    /// A generator continuing from a state read back from a device.
    pub fn from_state(s: [u64; 4]) -> Self {
        Self { s }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> (64 - MANTISSA_BITS)) as f64 * (1.0 / (1u64 << MANTISSA_BITS) as f64)
    }
}
