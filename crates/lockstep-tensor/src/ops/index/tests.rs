//! Every accumulation kernel against the sequential loop, and the row kernels on every SIMD
//! path.

use super::rows::{FORCE, RowGeom, rows_atomic, rows_buffers, rows_det_add};
use super::scatter::{scatter_atomic, scatter_buffers, scatter_det};
use crate::ops::matmul::Isa;
use crate::threads::Par;

fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect()
}

#[test]
fn every_row_and_scatter_kernel_agrees_with_the_sequential_loop() {
    // Destinations small (buffers), large (atomics / delegation) and with several outer rows.
    for (outer, n, m, inner) in [
        (1usize, 7usize, 40_000usize, 3usize),
        (1, 50_000, 20_000, 2),
        (3, 20, 9000, 5),
    ] {
        let src = data(outer * m * inner, 1);
        let idx: Vec<i64> = data(m, 2)
            .iter()
            .map(|v| ((v + 0.5) * n as f64) as i64 % n as i64)
            .collect();
        let g = RowGeom { outer, n, m, inner };
        let mut want = vec![0.0; outer * n * inner];
        for o in 0..outer {
            for (k, &r) in idx.iter().enumerate() {
                for j in 0..inner {
                    want[(o * n + r as usize) * inner + j] += src[(o * m + k) * inner + j];
                }
            }
        }
        let par = Par::new(3);
        type K = fn(&mut [f64], &[f64], &[i64], RowGeom, &Par);
        let kernels: [(&str, K); 3] = [
            ("buffers", rows_buffers),
            ("atomic", rows_atomic),
            ("det", rows_det_add),
        ];
        for (name, k) in kernels {
            let mut got = vec![0.0; want.len()];
            k(&mut got, &src, &idx, g, &par);
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() < 1e-9, "rows {name}: {a} vs {b}");
            }
        }
        // The same through scatter with the index broadcast along `inner`.
        let eidx: Vec<i64> = (0..outer * m * inner)
            .map(|p| idx[(p / inner) % m])
            .collect();
        let skernels: [(&str, K); 3] = [
            ("buffers", scatter_buffers),
            ("atomic", scatter_atomic),
            ("det", scatter_det),
        ];
        for (name, k) in skernels {
            let mut got = vec![0.0; want.len()];
            k(&mut got, &src, &eidx, g, &par);
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() < 1e-9, "scatter {name}: {a} vs {b}");
            }
        }
    }
}

#[test]
fn row_kernels_give_the_same_bits_on_every_simd_path() {
    // Block partials (many sources, small destination; with more threads than blocks, so
    // that blocks split their destination rows), destination-partitioned with buckets,
    // several outer rows; widths that leave vector remainders.
    for (outer, n, m, inner) in [
        (1usize, 10usize, 40_000usize, 67usize),
        (1, 5000, 3000, 33),
        (2, 30, 5000, 17),
        (1, 3, 70_000, 1),
        (1, 100, 20_000, 16),
        (2, 40, 17_000, 8),
    ] {
        let src: Vec<f32> = data(outer * m * inner, 3)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let idx: Vec<i64> = data(m, 4)
            .iter()
            .map(|v| ((v + 0.5) * n as f64) as i64 % n as i64)
            .collect();
        let g = RowGeom { outer, n, m, inner };
        let base: Vec<f32> = data(outer * n * inner, 5)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let run = |simd: Isa, threads: usize| {
            FORCE.with(|f| f.set(Some(simd)));
            let mut d = base.clone();
            rows_det_add(&mut d, &src, &idx, g, &Par::new(threads));
            FORCE.with(|f| f.set(None));
            d.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
        };
        let want = run(Isa::Portable, 1);
        let paths = [Isa::Portable, Isa::Avx2, Isa::Avx512];
        for simd in paths.into_iter().filter(|i| i.available()) {
            for threads in [1, 3, 8] {
                assert!(
                    run(simd, threads) == want,
                    "{outer}x{n}x{m}x{inner}: {simd:?} threads={threads}"
                );
            }
        }
    }
}
