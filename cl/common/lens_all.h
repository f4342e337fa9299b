/* Every lens header, both precisions: what each dialect's kernel file includes (after astro_dialect.h). */
#define ASTRO_REAL float
#define ASTRO_SUFFIX f32
#include "lens_model.h"
#undef ASTRO_REAL
#undef ASTRO_SUFFIX
#if ASTRO_HAS_FP64 /* float64 and the mixed-precision pipeline need double */
#define ASTRO_REAL double
#define ASTRO_SUFFIX f64
#include "lens_model.h"
#undef ASTRO_REAL
#undef ASTRO_SUFFIX
#include "lens_mixed.h"
#include "lens_split.h"
#endif
