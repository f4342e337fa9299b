//! The float types the host code is generic over.

/// The two floating types of the `cpu` model (the lens grid, the imgsub convolution), so one generic loop
/// serves float32 and float64; `PRECISION` names the kernels and scalars of device jobs built from them.
pub trait Real:
    Lanes
    + Copy
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
    /// The machine epsilon (twice the unit roundoff).
    const EPSILON: Self;
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
    fn abs(self) -> Self;
    /// The least value greater than self.
    fn next_up(self) -> Self;
    /// self × a + b, rounded once.
    fn mul_add(self, a: Self, b: Self) -> Self;
}

macro_rules! impl_real {
    ($t:ty, $p:ident) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const EPSILON: Self = <$t>::EPSILON;
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
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn next_up(self) -> Self {
                <$t>::next_up(self)
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

/// One 256-bit register of a float's lanes (8 float32 or 4 float64), for the loops whose sums must stay in
/// registers (the imgsub convolution's pieces): written with AVX2 and FMA intrinsics on x86-64 (the build's
/// baseline), as plain arrays elsewhere. The autovectoriser, left to the same loop, packs lanes of
/// different sums into one AVX-512 register and pays a shuffle per tap.
pub trait Lanes: Copy + Sized {
    type Vector: Copy;
    /// Lanes per vector.
    const LANES: usize;
    fn splat(v: Self) -> Self::Vector;
    /// The first LANES values of `s`.
    fn load(s: &[Self]) -> Self::Vector;
    /// k × x + acc per lane, rounded once (`mul_add`'s bits).
    fn fma(k: Self::Vector, x: Self::Vector, acc: Self::Vector) -> Self::Vector;
    fn add_lanes(a: Self::Vector, b: Self::Vector) -> Self::Vector;
    /// Into the first LANES values of `out`.
    fn store(v: Self::Vector, out: &mut [Self]);
}

/// `Lanes` with AVX2 and FMA intrinsics: the build's baseline on x86-64.
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx2",
    target_feature = "fma"
))]
mod lanes_avx2 {
    use super::Lanes;
    use std::arch::x86_64::*;

    macro_rules! impl_lanes {
        ($t:ty, $v:ty, $n:expr, $set1:ident, $loadu:ident, $fmadd:ident, $addv:ident, $storeu:ident) => {
            impl Lanes for $t {
                type Vector = $v;
                const LANES: usize = $n;
                #[inline(always)]
                fn splat(v: Self) -> $v {
                    // SAFETY: the build's baseline (this module's cfg) has AVX2 and FMA.
                    unsafe { $set1(v) }
                }
                #[inline(always)]
                fn load(s: &[Self]) -> $v {
                    let s = &s[..$n];
                    // SAFETY: `s` holds LANES values; the load needs no alignment.
                    unsafe { $loadu(s.as_ptr()) }
                }
                #[inline(always)]
                fn fma(k: $v, x: $v, acc: $v) -> $v {
                    // SAFETY: the build's baseline (this module's cfg) has AVX2 and FMA.
                    unsafe { $fmadd(k, x, acc) }
                }
                #[inline(always)]
                fn add_lanes(a: $v, b: $v) -> $v {
                    // SAFETY: the build's baseline (this module's cfg) has AVX2 and FMA.
                    unsafe { $addv(a, b) }
                }
                #[inline(always)]
                fn store(v: $v, out: &mut [Self]) {
                    let out = &mut out[..$n];
                    // SAFETY: `out` holds LANES values; the store needs no alignment.
                    unsafe { $storeu(out.as_mut_ptr(), v) }
                }
            }
        };
    }
    impl_lanes!(
        f32,
        __m256,
        8,
        _mm256_set1_ps,
        _mm256_loadu_ps,
        _mm256_fmadd_ps,
        _mm256_add_ps,
        _mm256_storeu_ps
    );
    impl_lanes!(
        f64,
        __m256d,
        4,
        _mm256_set1_pd,
        _mm256_loadu_pd,
        _mm256_fmadd_pd,
        _mm256_add_pd,
        _mm256_storeu_pd
    );
}

/// `Lanes` as plain arrays, for builds without AVX2 and FMA.
#[cfg(not(all(
    target_arch = "x86_64",
    target_feature = "avx2",
    target_feature = "fma"
)))]
mod lanes_portable {
    use super::Lanes;

    macro_rules! impl_lanes {
        ($t:ty, $n:expr) => {
            impl Lanes for $t {
                type Vector = [$t; $n];
                const LANES: usize = $n;
                #[inline(always)]
                fn splat(v: Self) -> [$t; $n] {
                    [v; $n]
                }
                #[inline(always)]
                fn load(s: &[Self]) -> [$t; $n] {
                    s[..$n].try_into().unwrap()
                }
                #[inline(always)]
                fn fma(k: [$t; $n], x: [$t; $n], acc: [$t; $n]) -> [$t; $n] {
                    std::array::from_fn(|i| k[i].mul_add(x[i], acc[i]))
                }
                #[inline(always)]
                fn add_lanes(a: [$t; $n], b: [$t; $n]) -> [$t; $n] {
                    std::array::from_fn(|i| a[i] + b[i])
                }
                #[inline(always)]
                fn store(v: [$t; $n], out: &mut [Self]) {
                    out[..$n].copy_from_slice(&v);
                }
            }
        };
    }
    impl_lanes!(f32, 8);
    impl_lanes!(f64, 4);
}
