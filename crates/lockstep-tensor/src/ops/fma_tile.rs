//! The FMA tile every register-blocked micro-kernel is stamped from: the GEMM kernel
//! (`matmul/kernel.rs`), implicit and Winograd convolution (`conv/implicit.rs`,
//! `conv/winograd.rs`) and the LSTM steps (`recurrent/lstm_kernel.rs`).
//!
//! A tile is `MR × NV` vector accumulators, zero or loaded from the output. Each of the `kc`
//! steps loads the `NV` vectors of B, then, row by row, broadcasts one element of A and fuses
//! it into the row's accumulators (`acc = a·b + acc`, one rounding); the tile is stored after
//! the last step. Every output element is thus one chain of fused multiply-adds over the steps
//! in order: the lanes never mix, so the bits depend on neither the instruction set nor the
//! tiling. What the kernels keep as their own is the addressing: where A's element and B's
//! vectors of a step are read, how the pointers advance, prefetches, where the tile is loaded
//! from and stored to.
//!
//! The macros are textually scoped: `ops/mod.rs` declares this module before the op families.

/// Stamps `$mac!(ARGS…, "FEATURES", [ELEM, VEC, LANES, zero, load, store, broadcast, fma])`:
/// the target features and the register vocabulary of one x86-64 FMA instruction set and
/// element type (`avx2_f32`, `avx2_f64`, `avx512_f32`, `avx512_f64`), written here once for
/// every kernel. The bracketed group is [`fma_tile!`]'s first argument.
#[cfg(target_arch = "x86_64")]
macro_rules! x86_fma {
    (avx2_f32, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*, "avx2,fma", [f32, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps,
            _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps]);
    };
    (avx2_f64, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*, "avx2,fma", [f64, __m256d, 4, _mm256_setzero_pd, _mm256_loadu_pd,
            _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd]);
    };
    (avx512_f32, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*, "avx512f", [f32, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps,
            _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps]);
    };
    (avx512_f64, $mac:ident!($($args:tt)*)) => {
        $mac!($($args)*, "avx512f", [f64, __m512d, 8, _mm512_setzero_pd, _mm512_loadu_pd,
            _mm512_storeu_pd, _mm512_set1_pd, _mm512_fmadd_pd]);
    };
}

/// One FMA tile (see the module docs) over a vocabulary `$isa` from [`x86_fma!`]:
///
/// ```text
/// fma_tile!($isa, MR, NV;
///     load if INIT => |i, v| SRC;          // optional: accumulator (i, v) from SRC if INIT
///     for S in 0..KC { PRE }               // each step (S: `_` or a name) starts with PRE
///     b |v| B;                             // the step's vector v of B is read at B
///     a |i| A;                             // the step's element of A for row i
///     then { POST }                        // each step ends with POST (advance pointers)
///     store |i, v| DST)                    // accumulator (i, v) to DST
/// ```
///
/// `SRC`, `B` and `DST` are pointers, `A` an element; they and `PRE`/`POST` are the caller's
/// code, run in that order. The order of the `b` and `a` lines is the order of the step's
/// instructions (the compiler keeps it): `b` first loads the `NV` vectors of B, then row by
/// row broadcasts A and fuses it into the row; `a` first broadcasts the `MR` elements of A,
/// then vector by vector loads B and fuses it into the column. The same fused multiply-adds
/// either way (the same bits). The caller keeps the `unsafe` block (and its safety argument).
/// `($isa ELEM)` and `($isa LANES)` name the element type and the lanes.
macro_rules! fma_tile {
    ([$t:ty, $v:ty, $lanes:literal, $($ops:ident),*] ELEM) => { $t };
    ([$t:ty, $v:ty, $lanes:literal, $($ops:ident),*] LANES) => { $lanes };
    // B's vectors first, then row by row.
    (
        $isa:tt, $mr:expr, $nv:expr;
        $(load if $init:expr => |$li:ident, $lv:ident| $src:expr;)?
        for $s:tt in 0..$kc:tt { $($pre:tt)* }
        b |$bj:ident| $b:expr;
        a |$ai:ident| $a:expr;
        then { $($post:tt)* }
        store |$si:ident, $sv:ident| $dst:expr $(;)?
    ) => {
        fma_tile!(@tile $isa, $mr, $nv, acc;
            $(load if $init => |$li, $lv| $src;)?
            for $s in 0..$kc { $($pre)* }
            step { fma_tile!(@rows $isa, $mr, $nv, acc; b |$bj| $b; a |$ai| $a); }
            then { $($post)* }
            store |$si, $sv| $dst)
    };
    // A's broadcasts first, then vector by vector.
    (
        $isa:tt, $mr:expr, $nv:expr;
        $(load if $init:expr => |$li:ident, $lv:ident| $src:expr;)?
        for $s:tt in 0..$kc:tt { $($pre:tt)* }
        a |$ai:ident| $a:expr;
        b |$bj:ident| $b:expr;
        then { $($post:tt)* }
        store |$si:ident, $sv:ident| $dst:expr $(;)?
    ) => {
        fma_tile!(@tile $isa, $mr, $nv, acc;
            $(load if $init => |$li, $lv| $src;)?
            for $s in 0..$kc { $($pre)* }
            step { fma_tile!(@columns $isa, $mr, $nv, acc; a |$ai| $a; b |$bj| $b); }
            then { $($post)* }
            store |$si, $sv| $dst)
    };
    (@rows [$t:ty, $v:ty, $lanes:literal, $zero:ident, $load:ident, $store:ident, $bcast:ident,
            $fma:ident], $mr:expr, $nv:expr, $acc:ident;
        b |$bj:ident| $b:expr; a |$ai:ident| $a:expr) => {
        let mut bv: [$v; $nv] = [$zero(); $nv];
        for $bj in 0..$nv {
            bv[$bj] = $load($b);
        }
        for $ai in 0..$mr {
            let ai = $bcast($a);
            for v in 0..$nv {
                $acc[$ai][v] = $fma(ai, bv[v], $acc[$ai][v]);
            }
        }
    };
    (@columns [$t:ty, $v:ty, $lanes:literal, $zero:ident, $load:ident, $store:ident,
               $bcast:ident, $fma:ident], $mr:expr, $nv:expr, $acc:ident;
        a |$ai:ident| $a:expr; b |$bj:ident| $b:expr) => {
        let mut av: [$v; $mr] = [$zero(); $mr];
        for $ai in 0..$mr {
            av[$ai] = $bcast($a);
        }
        for $bj in 0..$nv {
            let bv = $load($b);
            for i in 0..$mr {
                $acc[i][$bj] = $fma(av[i], bv, $acc[i][$bj]);
            }
        }
    };
    (@tile [$t:ty, $v:ty, $lanes:literal, $zero:ident, $load:ident, $store:ident, $bcast:ident,
            $fma:ident], $mr:expr, $nv:expr, $acc:ident;
        $(load if $init:expr => |$li:ident, $lv:ident| $src:expr;)?
        for $s:tt in 0..$kc:tt { $($pre:tt)* }
        step { $($step:tt)* }
        then { $($post:tt)* }
        store |$si:ident, $sv:ident| $dst:expr) => {{
        let mut $acc: [[$v; $nv]; $mr] = [[$zero(); $nv]; $mr];
        $(if $init {
            for $li in 0..$mr {
                for $lv in 0..$nv {
                    $acc[$li][$lv] = $load($src);
                }
            }
        })?
        for $s in 0..$kc {
            $($pre)*
            $($step)*
            $($post)*
        }
        for $si in 0..$mr {
            for $sv in 0..$nv {
                $store($dst, $acc[$si][$sv]);
            }
        }
    }};
}

/// The portable twin of [`fma_tile!`]: `MR × NR` scalar accumulators of `$zero`'s type, the
/// same hooks (`b |j|` points at the step's element `j` of B), and per element and step one
/// `mul_add` (one rounding, as the vector kernels' fused multiply-add): the same bits as every
/// vector build.
macro_rules! scalar_tile {
    (
        $zero:expr, $mr:expr, $nr:expr;
        $(load if $init:expr => |$li:ident, $lj:ident| $src:expr;)?
        for $s:tt in 0..$kc:tt { $($pre:tt)* }
        b |$bj:ident| $b:expr;
        a |$ai:ident| $a:expr;
        store |$si:ident, $sj:ident| $dst:expr $(;)?
    ) => {{
        let mut acc = [[$zero; $nr]; $mr];
        $(if $init {
            for ($li, row) in acc.iter_mut().enumerate() {
                for ($lj, v) in row.iter_mut().enumerate() {
                    *v = *$src;
                }
            }
        })?
        for $s in 0..$kc {
            $($pre)*
            for ($ai, row) in acc.iter_mut().enumerate() {
                let ai = $a;
                for ($bj, v) in row.iter_mut().enumerate() {
                    *v = ai.mul_add(*$b, *v);
                }
            }
        }
        for ($si, row) in acc.iter().enumerate() {
            for ($sj, v) in row.iter().enumerate() {
                *$dst = *v;
            }
        }
    }};
}
