//! Element types and the storage that holds them.

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit float (PyTorch's default).
    F32,
    /// 64-bit float.
    F64,
    /// 64-bit signed integer (indices, counts).
    I64,
    /// 8-bit unsigned integer.
    U8,
    /// Boolean (comparison results, masks).
    Bool,
}

impl DType {
    /// Whether the dtype is `F32` or `F64`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }
}

/// The storage behind a tensor: one contiguous buffer of one dtype, never resized.
#[derive(Clone, Debug, PartialEq)]
pub enum Storage {
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `u8` elements.
    U8(Vec<u8>),
    /// `bool` elements.
    Bool(Vec<bool>),
}

impl Storage {
    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::F32(_) => DType::F32,
            Storage::F64(_) => DType::F64,
            Storage::I64(_) => DType::I64,
            Storage::U8(_) => DType::U8,
            Storage::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Storage::F32(v) => v.len(),
            Storage::F64(v) => v.len(),
            Storage::I64(v) => v.len(),
            Storage::U8(v) => v.len(),
            Storage::Bool(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A Rust type that can be a tensor element.
pub trait Element:
    Copy + Send + Sync + PartialEq + PartialOrd + core::fmt::Debug + 'static
{
    /// Its dtype.
    const DTYPE: DType;
    /// The zero of the type (`false` for bool).
    const ZERO: Self;
    /// The one of the type (`true` for bool).
    const ONE: Self;
    /// Wraps a buffer as storage.
    fn into_storage(v: Vec<Self>) -> Storage;
    /// The buffer, if the storage holds this type.
    fn slice(s: &Storage) -> Option<&[Self]>;
    /// The buffer, mutably, if the storage holds this type.
    fn slice_mut(s: &mut Storage) -> Option<&mut Vec<Self>>;
    /// Conversion from f64 (floats round, integers truncate toward zero and saturate, as `as`).
    fn from_f64(x: f64) -> Self;
    /// Conversion to f64.
    fn to_f64(self) -> f64;
}

macro_rules! element {
    ($t:ty, $d:ident, $zero:expr, $one:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            const ZERO: Self = $zero;
            const ONE: Self = $one;
            fn into_storage(v: Vec<Self>) -> Storage {
                Storage::$d(v)
            }
            fn slice(s: &Storage) -> Option<&[Self]> {
                match s {
                    Storage::$d(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(s: &mut Storage) -> Option<&mut Vec<Self>> {
                match s {
                    Storage::$d(v) => Some(v),
                    _ => None,
                }
            }
            #[allow(clippy::cast_lossless)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[allow(clippy::cast_lossless)]
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}
element!(f32, F32, 0.0, 1.0);
element!(f64, F64, 0.0, 1.0);
element!(i64, I64, 0, 1);
element!(u8, U8, 0, 1);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    const ZERO: Self = false;
    const ONE: Self = true;
    fn into_storage(v: Vec<Self>) -> Storage {
        Storage::Bool(v)
    }
    fn slice(s: &Storage) -> Option<&[Self]> {
        match s {
            Storage::Bool(v) => Some(v),
            _ => None,
        }
    }
    fn slice_mut(s: &mut Storage) -> Option<&mut Vec<Self>> {
        match s {
            Storage::Bool(v) => Some(v),
            _ => None,
        }
    }
    fn from_f64(x: f64) -> Self {
        x != 0.0
    }
    fn to_f64(self) -> f64 {
        if self { 1.0 } else { 0.0 }
    }
}

/// The float element types, `f32` and `f64`: the one float trait of the workspace. Each kernel
/// family that needs more extends it with a sub-trait (GEMM's blocking and micro-kernels,
/// [`GemmFloat`](crate::ops::matmul::GemmFloat); the reductions' lane sums and `exp`,
/// [`LaneSum`](crate::ops::reduce::LaneSum) and [`Real`](crate::ops::reduce::Real); the
/// training layer's optimizers). Every method is one IEEE operation, correctly rounded, so
/// its bits are the same on every platform.
pub trait Float:
    Element
    + Default
    + core::ops::Add<Output = Self>
    + core::ops::Sub<Output = Self>
    + core::ops::Mul<Output = Self>
    + core::ops::Div<Output = Self>
    + core::ops::Neg<Output = Self>
{
    /// Not a number.
    const NAN: Self;
    /// Positive infinity.
    const INFINITY: Self;
    /// Negative infinity.
    const NEG_INFINITY: Self;
    /// `self * a + b` with one rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// The correctly rounded square root.
    fn sqrt(self) -> Self;
    /// `|self|`.
    fn abs(self) -> Self;
    /// Whether `self` is NaN.
    fn is_nan(self) -> bool;
}

macro_rules! float {
    ($t:ident) => {
        impl Float for $t {
            const NAN: Self = $t::NAN;
            const INFINITY: Self = $t::INFINITY;
            const NEG_INFINITY: Self = $t::NEG_INFINITY;
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                $t::mul_add(self, a, b)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                $t::sqrt(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                $t::abs(self)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
        }
    };
}
float!(f32);
float!(f64);

/// Runs `$body` with `$T` bound to the Rust type of `$dtype` (all five dtypes).
#[macro_export]
#[doc(hidden)]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::Bool => {
                type $T = bool;
                $body
            }
        }
    };
}
