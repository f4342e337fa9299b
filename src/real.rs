//! The float types the host code is generic over.

/// The two floating types of the `cpu` model (the lens grid, the imgsub convolution), so one generic loop
/// serves float32 and float64; `PRECISION` names the kernels and scalars of device jobs built from them.
pub trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const PRECISION: crate::backend::Precision;
    fn from_f64(v: f64) -> Self;
    /// From a small integer (pixel indices): i32 conversions vectorise where usize → float do not.
    fn from_i32(v: i32) -> Self;
    fn to_f64(self) -> f64;
    fn sqrt(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn atan2(self, x: Self) -> Self;
    fn max(self, other: Self) -> Self;
    /// self × a + b, rounded once.
    fn mul_add(self, a: Self, b: Self) -> Self;
}

macro_rules! impl_real {
    ($t:ty, $p:ident) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const PRECISION: crate::backend::Precision = crate::backend::Precision::$p;
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_i32(v: i32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn atan2(self, x: Self) -> Self {
                <$t>::atan2(self, x)
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                <$t>::max(self, other)
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                <$t>::mul_add(self, a, b)
            }
        }
    };
}
impl_real!(f32, F32);
impl_real!(f64, F64);
