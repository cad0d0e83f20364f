use super::*;

/// A fresh seed per run (printed by every assertion message) so inputs are not always the same.
fn fresh_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
}

fn random_logits(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| (rng.next_f64() * 8.0 - 4.0) as f32).collect()
}

fn sampling(temperature: f32, seed: u64) -> SamplerConfig {
    SamplerConfig { temperature, seed, ..SamplerConfig::default() }
}

#[test]
fn same_seed_same_tokens_different_seed_different_tokens() {
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let logits = random_logits(&mut rng, 500);
    let run = |s: u64| {
        let mut sampler = Sampler::new(sampling(1.0, s)).unwrap();
        (0..64).map(|_| sampler.sample(&mut logits.clone(), &[]).unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(run(seed), run(seed), "seed {seed}");
    // 64 draws over a ~flat 500-way distribution: equal sequences by chance is impossible.
    assert_ne!(run(seed), run(seed.wrapping_add(1)), "seed {seed}");
}

#[test]
fn greedy_is_argmax_with_lowest_index_on_ties() {
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let mut logits = random_logits(&mut rng, 1000);
    let top = (rng.next_u64() % 1000) as usize;
    logits[top] = 10.0;
    let mut sampler = Sampler::new(sampling(0.0, seed)).unwrap();
    assert_eq!(sampler.sample(&mut logits.clone(), &[]).unwrap() as usize, top, "seed {seed}");
    let tie = vec![1.0, 3.0, 3.0, f32::NEG_INFINITY];
    assert_eq!(argmax(&tie).unwrap(), 1);
}

#[test]
fn top_k_and_top_p_and_min_p_restrict_the_support() {
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let logits = random_logits(&mut rng, 300);
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    let top3 = &order[..3];

    let mut k3 = Sampler::new(SamplerConfig { top_k: 3, ..sampling(2.0, seed) }).unwrap();
    // top_p tiny: only the single best survives.
    let mut p0 = Sampler::new(SamplerConfig { top_p: 1e-6, ..sampling(2.0, seed) }).unwrap();
    // min_p 1.0: only tokens as likely as the best survive.
    let mut m1 = Sampler::new(SamplerConfig { min_p: 1.0, ..sampling(2.0, seed) }).unwrap();
    for _ in 0..200 {
        let t = k3.sample(&mut logits.clone(), &[]).unwrap() as usize;
        assert!(top3.contains(&t), "seed {seed}: {t} not in top 3");
        assert_eq!(p0.sample(&mut logits.clone(), &[]).unwrap() as usize, order[0], "seed {seed}");
        assert_eq!(m1.sample(&mut logits.clone(), &[]).unwrap() as usize, order[0], "seed {seed}");
    }
}

#[test]
fn draw_frequencies_follow_the_softmax() {
    let seed = fresh_seed();
    let logits = vec![0.0f32, 1.0, 2.0, -1.0];
    let z: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
    let mut sampler = Sampler::new(sampling(1.0, seed)).unwrap();
    const DRAWS: usize = 40_000;
    let mut counts = [0usize; 4];
    for _ in 0..DRAWS {
        counts[sampler.sample(&mut logits.clone(), &[]).unwrap() as usize] += 1;
    }
    for (i, &c) in counts.iter().enumerate() {
        let p = (logits[i] as f64).exp() / z;
        // Binomial std of the frequency is sqrt(p(1-p)/DRAWS) <= 0.0025; 6 sigma never fails by chance.
        let sigma = (p * (1.0 - p) / DRAWS as f64).sqrt();
        let freq = c as f64 / DRAWS as f64;
        assert!((freq - p).abs() < 6.0 * sigma, "seed {seed}: token {i} freq {freq} vs p {p}");
    }
}

#[test]
fn repeat_penalty_scales_seen_logits_by_sign() {
    let mut sampler = Sampler::new(SamplerConfig { repeat_penalty: 2.0, ..SamplerConfig::default() }).unwrap();
    let mut logits = vec![4.0f32, -1.0, 3.0, 0.5];
    // Token 0 seen (positive: halved), token 1 seen (negative: doubled); greedy then picks 2.
    let picked = sampler.sample(&mut logits, &[0, 1, 0]).unwrap();
    assert_eq!(logits, vec![2.0, -2.0, 3.0, 0.5]);
    assert_eq!(picked, 2);
}

#[test]
fn bad_input_is_a_typed_error() {
    assert!(matches!(
        Sampler::new(SamplerConfig { top_p: 0.0, ..SamplerConfig::default() }),
        Err(SamplerError::BadSetting { name: "top_p", .. })
    ));
    let mut s = Sampler::new(sampling(1.0, 1)).unwrap();
    assert_eq!(s.sample(&mut [], &[]), Err(SamplerError::Empty));
    assert_eq!(s.sample(&mut [1.0, f32::NAN], &[]), Err(SamplerError::NaN { index: 1 }));
    assert_eq!(s.sample(&mut [f32::NEG_INFINITY; 3], &[]), Err(SamplerError::AllMasked));
}
