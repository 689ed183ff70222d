//! MT19937 on every instruction-set path (`set_isa`, process-wide: this file is its own test
//! process): the vectorised twist and tempering give the reference words on each.

mod common;

use lockstep_rng::engines::mt19937::Mt19937;
use lockstep_rng::isa::{Isa, set_isa};

/// The words of `seed` from one `next_u32` at a time, then by `fill_u32` in chunks of varied
/// sizes (across many twists), on the path in use.
fn streams(seed: u32) -> (Vec<u32>, Vec<u32>) {
    let mut a = Mt19937::from_seed_u32(seed);
    let single: Vec<u32> = (0..7000).map(|_| a.next_u32()).collect();
    let mut b = Mt19937::from_seed_u32(seed);
    let mut filled = Vec::new();
    for n in [1, 622, 3, 624, 1250, 17, 624, 2000, 1859] {
        let mut buf = vec![0u32; n];
        b.fill_u32(&mut buf);
        filled.extend(buf);
    }
    assert_eq!(a, b);
    (single, filled)
}

#[test]
fn every_path_gives_the_reference_stream() {
    let _turn = common::isa_turn();
    let mut reference = None;
    for isa in Isa::ALL {
        if !isa.available() {
            continue;
        }
        set_isa(Some(isa)).unwrap();
        // The authors' published value: the 10000th output for seed 5489.
        let mut mt = Mt19937::from_seed_u32(5489);
        let mut buf = vec![0u32; 10_000];
        mt.fill_u32(&mut buf);
        assert_eq!(buf[9999], 4_123_659_995, "{isa:?}");
        let mut mt = Mt19937::from_seed_u32(5489);
        let last = (0..10_000).map(|_| mt.next_u32()).last();
        assert_eq!(last, Some(4_123_659_995), "{isa:?}");
        // mt19937ar.out: the first outputs after init_by_array.
        let mut mt = Mt19937::from_key(&[0x123, 0x234, 0x345, 0x456]);
        let mut first = [0u32; 5];
        mt.fill_u32(&mut first);
        assert_eq!(
            first,
            [
                1_067_595_299,
                955_945_823,
                477_289_528,
                4_107_218_783,
                4_228_976_476
            ],
            "{isa:?}"
        );
        let (single, filled) = streams(2026);
        assert_eq!(single, filled, "{isa:?}");
        match &reference {
            None => reference = Some(single),
            Some(r) => assert_eq!(r, &single, "{isa:?}"),
        }
    }
    set_isa(None).unwrap();
}

/// PyTorch's dropout mask (`bernoulli_(1 − p)` divided by `1 − p`) on every path: element `i`
/// kept exactly when the `i`-th 53-bit uniform of the stream is below `1 − p`, decided here
/// one draw at a time; the vector decisions (eight lanes with AVX-512, four with AVX2) must give
/// those bits, and leave the generator where the draws do.
#[test]
fn every_path_gives_the_drawn_dropout_mask() {
    let _turn = common::isa_turn();
    use lockstep_rng::Generator;
    use lockstep_rng::compat::torch::dropout_mask;
    let (n, p) = (3001, 0.3);
    let mut g = Generator::with_seed(7);
    let keep32 = (1.0 - p) as f32;
    let want: Vec<u32> = (0..n)
        .map(|_| match g.next_f64() < 1.0 - p {
            true => (1.0 / keep32).to_bits(),
            false => 0,
        })
        .collect();
    let after = g.next_u32();
    let kept = want.iter().filter(|&&b| b != 0).count();
    assert!(kept > n / 2 && kept < n, "{kept} of {n} kept");
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        set_isa(Some(isa)).unwrap();
        let mut g = Generator::with_seed(7);
        let got: Vec<u32> = dropout_mask::<f32>(&mut g, n, p)
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert!(got == want, "{isa:?}");
        assert_eq!(g.next_u32(), after, "{isa:?}");
        let mut g = Generator::with_seed(7);
        let got64 = dropout_mask::<f64>(&mut g, n, p).unwrap();
        let kept64: Vec<bool> = got64.iter().map(|&v| v != 0.0).collect();
        assert_eq!(
            kept64,
            want.iter().map(|&b| b != 0).collect::<Vec<_>>(),
            "{isa:?}"
        );
        assert!(
            got64.iter().all(|&v| v == 0.0 || v == 1.0 / (1.0 - p)),
            "{isa:?}"
        );
    }
    set_isa(None).unwrap();
}
