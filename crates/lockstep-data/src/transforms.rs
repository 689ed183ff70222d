//! Image transforms that draw from the sample's [`SampleRng`].
//!
//! Images are float32 tensors shaped `[C, H, W]` (or `[H, W]`). Each random transform documents
//! its draws; in TorchCompatible mode they are exactly those of the PyTorch code quoted, so a
//! PyTorch `Dataset` written with those lines gives bit-identical batches.

use crate::error::{Result, invalid};
use crate::rng::SampleRng;
use lockstep_tensor::{DType, Tensor};

/// A per-sample transform.
pub trait Transform: Send + Sync {
    /// Applies the transform, drawing from `rng` if it is random.
    ///
    /// # Errors
    /// If the input is not what the transform accepts (dtype, rank, channel count).
    fn apply(&self, x: Tensor, rng: &mut SampleRng<'_>) -> Result<Tensor>;
}

/// `(c, h, w)` of a float32 image tensor.
fn chw(op: &'static str, x: &Tensor) -> Result<(usize, usize, usize)> {
    if x.dtype() != DType::F32 {
        return Err(invalid(
            op,
            "img",
            format!("expects a float32 image, got {:?}", x.dtype()),
        ));
    }
    match *x.shape() {
        [h, w] => Ok((1, h, w)),
        [c, h, w] => Ok((c, h, w)),
        ref s => Err(invalid(
            op,
            "img",
            format!("expects [C, H, W] or [H, W], got {s:?}"),
        )),
    }
}

fn pixels(x: &Tensor) -> Result<Vec<f32>> {
    if x.is_contiguous() {
        Ok(x.data::<f32>()?.to_vec())
    } else {
        Ok(x.contiguous().data::<f32>()?.to_vec())
    }
}

/// `Compose([...])`: the transforms in order.
pub struct Compose(pub Vec<Box<dyn Transform>>);

impl Transform for Compose {
    fn apply(&self, mut x: Tensor, rng: &mut SampleRng<'_>) -> Result<Tensor> {
        for t in &self.0 {
            x = t.apply(x, rng)?;
        }
        Ok(x)
    }
}

/// `RandomCrop(size, padding)`: zero-pads `padding` pixels on every side, then crops `size`
/// at a random offset. Draws (torchvision's `get_params`): `i = torch.randint(0, H' − h + 1,
/// (1,))`, then `j = torch.randint(0, W' − w + 1, (1,))` — none when the padded image already
/// has the crop's size. PerSample: NumPy `integers` for `i`, then `j`.
#[derive(Clone, Debug)]
pub struct RandomCrop {
    /// Output `(h, w)`.
    pub size: (usize, usize),
    /// Zero padding on each side.
    pub padding: usize,
}

impl RandomCrop {
    /// A square crop of `size` after `padding`.
    pub fn new(size: usize, padding: usize) -> Self {
        Self {
            size: (size, size),
            padding,
        }
    }
}

impl Transform for RandomCrop {
    fn apply(&self, x: Tensor, rng: &mut SampleRng<'_>) -> Result<Tensor> {
        const OP: &str = "RandomCrop";
        let (c, h, w) = chw(OP, &x)?;
        let p = self.padding;
        let (hp, wp) = (h + 2 * p, w + 2 * p);
        let (th, tw) = self.size;
        if th > hp || tw > wp {
            return Err(invalid(
                OP,
                "size",
                format!(
                    "required crop size {:?} is larger than the padded image {:?}",
                    (th, tw),
                    (hp, wp)
                ),
            ));
        }
        let (i, j) = if th == hp && tw == wp {
            (0, 0)
        } else {
            let i = rng.randint(0, (hp - th + 1) as i64)? as usize;
            let j = rng.randint(0, (wp - tw + 1) as i64)? as usize;
            (i, j)
        };
        let c_x = if x.is_contiguous() {
            x.clone()
        } else {
            x.contiguous()
        };
        let src = c_x.data::<f32>()?;
        let mut out = vec![0f32; c * th * tw];
        for ch in 0..c {
            for r in 0..th {
                // Row r of the crop is row i + r − p of the image (zero outside).
                let sr = (i + r).wrapping_sub(p);
                if sr >= h {
                    continue;
                }
                for q in 0..tw {
                    let sc = (j + q).wrapping_sub(p);
                    if sc < w {
                        out[(ch * th + r) * tw + q] = src[(ch * h + sr) * w + sc];
                    }
                }
            }
        }
        let shape: Vec<usize> = if x.shape().len() == 2 {
            vec![th, tw]
        } else {
            vec![c, th, tw]
        };
        Ok(Tensor::from_vec(out, &shape)?)
    }
}

/// `RandomHorizontalFlip(p)`: mirrors the columns if `torch.rand(1) < p` (float32 compare).
/// PerSample: NumPy `random(dtype=float32) < p`.
#[derive(Clone, Debug)]
pub struct RandomHorizontalFlip {
    /// Flip probability.
    pub p: f64,
}

impl RandomHorizontalFlip {
    /// Flips with probability `p`.
    pub fn new(p: f64) -> Self {
        Self { p }
    }
}

impl Transform for RandomHorizontalFlip {
    fn apply(&self, x: Tensor, rng: &mut SampleRng<'_>) -> Result<Tensor> {
        let (c, h, w) = chw("RandomHorizontalFlip", &x)?;
        if !(rng.rand_f32() < self.p as f32) {
            return Ok(x);
        }
        let mut v = pixels(&x)?;
        for row in v.chunks_exact_mut(w).take(c * h) {
            row.reverse();
        }
        Ok(Tensor::from_vec(v, x.shape())?)
    }
}

/// Gaussian noise: `x + torch.randn_like(x) * std` in float32 (multiply, then add). PerSample:
/// NumPy `standard_normal(x.size, dtype=float32)`.
#[derive(Clone, Debug)]
pub struct GaussianNoise {
    /// Standard deviation.
    pub std: f32,
}

impl GaussianNoise {
    /// Noise of standard deviation `std`.
    pub fn new(std: f32) -> Self {
        Self { std }
    }
}

impl Transform for GaussianNoise {
    fn apply(&self, x: Tensor, rng: &mut SampleRng<'_>) -> Result<Tensor> {
        chw("GaussianNoise", &x)?;
        let mut v = pixels(&x)?;
        let mut z = vec![0f32; v.len()];
        rng.randn_f32(&mut z);
        for (a, z) in v.iter_mut().zip(&z) {
            *a += *z * self.std;
        }
        Ok(Tensor::from_vec(v, x.shape())?)
    }
}

/// `Normalize(mean, std)`: `(x − mean[c]) / std[c]` per channel in float32. No draws.
#[derive(Clone, Debug)]
pub struct Normalize {
    /// Per-channel means (one value applies to every channel).
    pub mean: Vec<f32>,
    /// Per-channel standard deviations.
    pub std: Vec<f32>,
}

impl Normalize {
    /// Normalization by per-channel `mean` and `std`.
    pub fn new(mean: Vec<f32>, std: Vec<f32>) -> Self {
        Self { mean, std }
    }
}

impl Transform for Normalize {
    fn apply(&self, x: Tensor, _rng: &mut SampleRng<'_>) -> Result<Tensor> {
        const OP: &str = "Normalize";
        let (c, h, w) = chw(OP, &x)?;
        let pick = |v: &[f32], k: usize, arg| -> Result<f32> {
            match v.len() {
                1 => Ok(v[0]),
                n if n == c => Ok(v[k]),
                n => Err(invalid(OP, arg, format!("{n} values for {c} channels"))),
            }
        };
        let mut v = pixels(&x)?;
        for ch in 0..c {
            let (m, s) = (pick(&self.mean, ch, "mean")?, pick(&self.std, ch, "std")?);
            if s == 0.0 {
                return Err(invalid(
                    OP,
                    "std",
                    "std evaluated to zero, leading to division by zero",
                ));
            }
            for a in &mut v[ch * h * w..(ch + 1) * h * w] {
                *a = (*a - m) / s;
            }
        }
        Ok(Tensor::from_vec(v, x.shape())?)
    }
}
