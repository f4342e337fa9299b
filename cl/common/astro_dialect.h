/* One set of qualifiers for the three kernel dialects (OpenCL C 1.2, CUDA C++, SYCL 2020), so per-element
 * physics headers are written once. Launch geometry and memory use stay idiomatic in each dialect's own
 * kernel file; only the arithmetic lives in shared headers.
 *
 * ASTRO_FN        qualifier for a device function
 * ASTRO_FN_INLINED  the same, always inlined: for a large body that two kernels call (Intel's CPU compiler
 *                 otherwise calls it out of line and vectorises the work-items 1.5x slower)
 * ASTRO_RSQRT(x)  reciprocal square root of a positive normal number, float or double overload (a float
 *                 denormal argument may be flushed to zero: callers clamp, and so skip the fix-up code)
 * ASTRO_REAL      the working floating type (float or double), chosen by the including kernel
 * ASTRO_GLOBAL    address-space qualifier of kernel buffer pointers (OpenCL __global; empty elsewhere)
 * ASTRO_RESTRICT  no-alias qualifier for buffer pointers
 * ASTRO_SQRT, ASTRO_LOG, ASTRO_LOG1P, ASTRO_ATAN2, ASTRO_FMAX, ASTRO_FMIN   math, float or double overloads
 * ASTRO_ATOMIC_INC(p)     atomically p[0] += 1 on a global unsigned int, returning the old value
 * ASTRO_ATOMIC_XCHG(p, v) atomically swaps v into a global unsigned int, returning the old value
 * ASTRO_LOCAL             address-space qualifier of work-group local memory (OpenCL __local; empty elsewhere)
 * ASTRO_BARRIER()         work-group barrier with local-memory fence
 * ASTRO_U64, ASTRO_I64    64-bit unsigned and signed integer types
 * ASTRO_MULHI32/64(a, b)  high half of the full unsigned product
 * ASTRO_UINT_AS_FLOAT(u)  reinterprets 32 bits as a float
 * ASTRO_F64_AS_U64(x), ASTRO_U64_AS_F64(u)  reinterpret a double as 64 bits and back (float64 code only)
 * ASTRO_SINCOS_FAST(x, s, c)  float sine and cosine on the hardware's fast path (x in [-pi, pi])
 * ASTRO_SINCOS(x, s, c)   double sine and cosine of one argument in one call (shared range reduction)
 * ASTRO_EXP, ASTRO_COS, ASTRO_POW, ASTRO_FMA  double math (fma: one rounding, so every model sums alike)
 * astro_atomic_add_f64(p, v)  atomically p[0] += v on a global double (OpenCL: compare-and-swap loop,
 *                         needs cl_khr_int64_base_atomics; ASTRO_HAS_ATOMIC_F64 says whether it exists)
 * astro_atomic_add_f64_local(p, v)  OpenCL only: the same on a double in work-group local memory
 * ASTRO_HAS_FP64          1 where double is available (OpenCL: cl_khr_fp64), else 0: float64 code is
 *                         compiled only then, so float32 kernels still build on devices without it
 * ASTRO_UNROLL            put before a loop of constant trip count whose body indexes a small array by the
 *                         loop variable: unrolled, the array stays in registers (nvcc otherwise put a 28-float
 *                         window on the stack; docs/perf-notes.md, image subtraction). GPUs only: on CPU
 *                         OpenCL (PoCL 2x) and SYCL's CPU runtime the forced unrolling was slower.
 * ASTRO_VECTOR_SUM_F32    put before a loop that sums float values per work-item: lets a CPU OpenCL
 *                         compiler that vectorises innermost loops (PoCL) split the sum into 16 lanes, which
 *                         it may not do unasked (it reorders additions). Only on OpenCL CPU devices (the host
 *                         defines ASTRO_CPU_DEVICE); empty on GPUs, in CUDA and in SYCL, whose compilers
 *                         vectorise across work-items (docs/perf-notes.md, "PoCL against Intel's
 *                         CPU OpenCL"). Not for double loops: PoCL's double sincos is a call it cannot
 *                         vectorise.
 */
#ifndef ASTRO_DIALECT_H
#define ASTRO_DIALECT_H

#if defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__)
#  define ASTRO_DIALECT_OPENCL 1
#  define ASTRO_FN static inline
#  define ASTRO_FN_INLINED static inline __attribute__((always_inline))
#  define ASTRO_RSQRT(x) rsqrt(x)
#  define ASTRO_SQRT(x) sqrt(x)
#  define ASTRO_LOG(x) log(x)
#  define ASTRO_LOG1P(x) log1p(x)
#  define ASTRO_ATAN2(y, x) atan2(y, x)
#  define ASTRO_FMAX(a, b) fmax(a, b)
#  define ASTRO_FMIN(a, b) fmin(a, b)
#  define ASTRO_FABS(x) fabs(x)
#  define ASTRO_ATOMIC_INC(p) atomic_inc(p)
#  define ASTRO_ATOMIC_XCHG(p, v) atomic_xchg(p, v)
#  define ASTRO_GLOBAL __global
#  define ASTRO_RESTRICT restrict
#  define ASTRO_LOCAL __local
#  define ASTRO_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#  define ASTRO_BARRIER_GLOBAL() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)
#  define ASTRO_SINCOSPI(x, s, c) (*(s) = sinpi(x), *(c) = cospi(x))
#  define ASTRO_U64 ulong
#  define ASTRO_I64 long
#  define ASTRO_MULHI32(a, b) mul_hi((uint)(a), (uint)(b))
#  define ASTRO_MULHI64(a, b) mul_hi((ulong)(a), (ulong)(b))
#  define ASTRO_UINT_AS_FLOAT(u) as_float(u)
#  define ASTRO_F64_AS_U64(x) as_ulong(x)
#  define ASTRO_U64_AS_F64(u) as_double(u)
#  define ASTRO_SINCOS_FAST(x, s, c) (*(s) = native_sin(x), *(c) = native_cos(x))
#  define ASTRO_SINCOS(x, s, c) (*(s) = sincos(x, c))
#  if defined(ASTRO_CPU_DEVICE)
#    define ASTRO_VECTOR_SUM_F32 _Pragma("clang loop vectorize_width(16)")
#    define ASTRO_UNROLL
#  else
#    define ASTRO_VECTOR_SUM_F32
#    define ASTRO_UNROLL _Pragma("unroll")
#  endif
#  ifdef cl_khr_fp64
#    pragma OPENCL EXTENSION cl_khr_fp64 : enable
#    define ASTRO_HAS_FP64 1
#  else
#    define ASTRO_HAS_FP64 0
#  endif
#  define ASTRO_EXP(x) exp(x)
#  define ASTRO_COS(x) cos(x)
#  define ASTRO_POW(x, y) pow(x, y)
#  define ASTRO_FMA(a, b, c) fma(a, b, c)
#  if ASTRO_HAS_FP64 && defined(cl_khr_int64_base_atomics)
#    pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
#    define ASTRO_HAS_ATOMIC_F64 1
#    define ASTRO_CAS_ADD_F64(NAME, SPACE)                                                \
        static inline void NAME(volatile SPACE double *p, double v)                       \
        {                                                                                 \
            volatile SPACE ulong *bits = (volatile SPACE ulong *)p;                       \
            ulong seen = *bits, expected;                                                 \
            do {                                                                          \
                expected = seen;                                                          \
                seen = atom_cmpxchg(bits, expected, as_ulong(as_double(expected) + v));   \
            } while (seen != expected);                                                   \
        }
ASTRO_CAS_ADD_F64(astro_atomic_add_f64, __global)
ASTRO_CAS_ADD_F64(astro_atomic_add_f64_local, __local)
#  else
#    define ASTRO_HAS_ATOMIC_F64 0
#  endif
#elif defined(__CUDACC__)
#  define ASTRO_DIALECT_CUDA 1
#  define ASTRO_FN static __device__ __forceinline__
#  define ASTRO_FN_INLINED ASTRO_FN
/* rsqrtf without flush-to-zero wraps MUFU.RSQ in a denormal test and two rescales (3 of the lens loop's
 * 13 instructions per pixel); the .ftz form is the bare MUFU, identical for normal arguments. */
static __device__ __forceinline__ float astro_rsqrt(float x)
{
    float r;
    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
static __device__ __forceinline__ double astro_rsqrt(double x) { return rsqrt(x); }
#  define ASTRO_RSQRT(x) astro_rsqrt(x)
#  define ASTRO_SQRT(x) sqrt(x)
#  define ASTRO_LOG(x) log(x)
#  define ASTRO_LOG1P(x) log1p(x)
#  define ASTRO_ATAN2(y, x) atan2(y, x)
#  define ASTRO_FMAX(a, b) fmax(a, b)
#  define ASTRO_FMIN(a, b) fmin(a, b)
#  define ASTRO_FABS(x) fabs(x)
#  define ASTRO_ATOMIC_INC(p) atomicAdd(p, 1u)
#  define ASTRO_ATOMIC_XCHG(p, v) atomicExch(p, v)
#  define ASTRO_GLOBAL
#  define ASTRO_RESTRICT __restrict__
#  define ASTRO_LOCAL
#  define ASTRO_BARRIER() __syncthreads()
#  define ASTRO_BARRIER_GLOBAL() __syncthreads()
#  define ASTRO_SINCOSPI(x, s, c) sincospi(x, s, c)
#  define ASTRO_U64 unsigned long long
#  define ASTRO_I64 long long
#  define ASTRO_MULHI32(a, b) __umulhi((unsigned int)(a), (unsigned int)(b))
#  define ASTRO_MULHI64(a, b) __umul64hi((unsigned long long)(a), (unsigned long long)(b))
#  define ASTRO_UINT_AS_FLOAT(u) __uint_as_float(u)
#  define ASTRO_F64_AS_U64(x) ((unsigned long long)__double_as_longlong(x))
#  define ASTRO_U64_AS_F64(u) __longlong_as_double((long long)(u))
#  define ASTRO_SINCOS_FAST(x, s, c) __sincosf(x, s, c)
#  define ASTRO_VECTOR_SUM_F32
#  define ASTRO_UNROLL _Pragma("unroll")
#  define ASTRO_SINCOS(x, s, c) sincos(x, s, c)
#  define ASTRO_EXP(x) exp(x)
#  define ASTRO_COS(x) cos(x)
#  define ASTRO_POW(x, y) pow(x, y)
#  define ASTRO_FMA(a, b, c) fma(a, b, c)
#  define ASTRO_HAS_ATOMIC_F64 1
static __device__ __forceinline__ void astro_atomic_add_f64(double *p, double v) { atomicAdd(p, v); }
#elif defined(SYCL_LANGUAGE_VERSION) || defined(__SYCL_DEVICE_ONLY__)
#  define ASTRO_DIALECT_SYCL 1
#  define ASTRO_FN static inline
#  define ASTRO_FN_INLINED static inline __attribute__((always_inline))
#  define ASTRO_RSQRT(x) sycl::rsqrt(x)
#  define ASTRO_SQRT(x) sycl::sqrt(x)
#  define ASTRO_LOG(x) sycl::log(x)
#  define ASTRO_LOG1P(x) sycl::log1p(x)
#  define ASTRO_ATAN2(y, x) sycl::atan2(y, x)
#  define ASTRO_FMAX(a, b) sycl::fmax(a, b)
#  define ASTRO_FMIN(a, b) sycl::fmin(a, b)
#  define ASTRO_FABS(x) sycl::fabs(x)
#  define ASTRO_ATOMIC_INC(p)                                                                       \
    (sycl::atomic_ref<unsigned int, sycl::memory_order::relaxed, sycl::memory_scope::device,       \
                      sycl::access::address_space::global_space>(*(p))                              \
         .fetch_add(1u))
#  define ASTRO_ATOMIC_XCHG(p, v)                                                                   \
    (sycl::atomic_ref<unsigned int, sycl::memory_order::relaxed, sycl::memory_scope::device,       \
                      sycl::access::address_space::global_space>(*(p))                              \
         .exchange(v))
#  define ASTRO_GLOBAL
#  define ASTRO_RESTRICT __restrict__
#  define ASTRO_LOCAL
#  define ASTRO_BARRIER() sycl::group_barrier(sycl::ext::oneapi::this_work_item::get_work_group<1>())
/* SYCL 2020's group barrier orders every address space at work-group scope. */
#  define ASTRO_BARRIER_GLOBAL() ASTRO_BARRIER()
#  define ASTRO_SINCOSPI(x, s, c) (*(s) = sycl::sinpi(x), *(c) = sycl::cospi(x))
#  define ASTRO_U64 uint64_t
#  define ASTRO_I64 int64_t
#  define ASTRO_MULHI32(a, b) sycl::mul_hi((uint32_t)(a), (uint32_t)(b))
#  define ASTRO_MULHI64(a, b) sycl::mul_hi((uint64_t)(a), (uint64_t)(b))
#  define ASTRO_UINT_AS_FLOAT(u) sycl::bit_cast<float>((uint32_t)(u))
#  define ASTRO_F64_AS_U64(x) sycl::bit_cast<uint64_t>((double)(x))
#  define ASTRO_U64_AS_F64(u) sycl::bit_cast<double>((uint64_t)(u))
#  define ASTRO_SINCOS_FAST(x, s, c) (*(s) = sycl::native::sin(x), *(c) = sycl::native::cos(x))
#  define ASTRO_VECTOR_SUM_F32
#  define ASTRO_UNROLL
#  define ASTRO_SINCOS(x, s, c) (*(s) = sycl::sincos(x, sycl::private_ptr<double>(c)))
#  define ASTRO_EXP(x) sycl::exp(x)
#  define ASTRO_COS(x) sycl::cos(x)
#  define ASTRO_POW(x, y) sycl::pow(x, y)
#  define ASTRO_FMA(a, b, c) sycl::fma(a, b, c)
#  define ASTRO_HAS_ATOMIC_F64 1
static inline void astro_atomic_add_f64(double *p, double v)
{
    sycl::atomic_ref<double, sycl::memory_order::relaxed, sycl::memory_scope::device,
                     sycl::access::address_space::global_space>(*p)
        .fetch_add(v);
}
#else
/* Plain C/C++ (host tools, tests). */
#  include <math.h>
#  define ASTRO_FN static inline
#  define ASTRO_FN_INLINED static inline __attribute__((always_inline))
#  define ASTRO_RSQRT(x) (1 / sqrt(x))
#  define ASTRO_SQRT(x) sqrt(x)
#  define ASTRO_LOG(x) log(x)
#  define ASTRO_LOG1P(x) log1p(x)
#  define ASTRO_ATAN2(y, x) atan2(y, x)
#  define ASTRO_FMAX(a, b) fmax(a, b)
#  define ASTRO_FMIN(a, b) fmin(a, b)
#  define ASTRO_FABS(x) fabs(x)
#  define ASTRO_GLOBAL
#  define ASTRO_RESTRICT
#endif

#ifndef ASTRO_HAS_FP64
#  define ASTRO_HAS_FP64 1
#endif

#define ASTRO_CAT_(a, b) a##_##b
#define ASTRO_CAT(a, b) ASTRO_CAT_(a, b)

#endif /* ASTRO_DIALECT_H */
