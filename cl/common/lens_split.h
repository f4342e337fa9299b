/* The near/far split of the lens grid (issue 17; src/workload/lens/split.rs, docs/lens.md "The near/far
 * split"), shared by the three dialects. Include astro_dialect.h and lens_model.h for both precisions first.
 *
 * Steps of one band (the host builds the sequence; src/workload/lens/device.rs):
 *   1. lens_grid_f32 (lens_grid_f64 where the plan chose a float64 lattice) on the coarse lattice: the
 *      galaxies alone at the node rows the band needs, then lens_split_lines_item (_f64_item): the y-pass of
 *      the interpolation for every pixel row (float64 pairs);
 *   2. lens_split_nodes_item: each galaxy's own float64 values on the box of nodes around it;
 *   3. lens_split_pixel_item (lens_split_pixel_sie_item when no halo is a dPIE): per pixel of the band (plus
 *      its next row), the cluster halos (float64) + the cubic interpolant of the coarse field, and for every
 *      galaxy within R of the pixel its exact deflection in place of its interpolant;
 *   4. lens_split_flag_item: flags the pixels whose magnification the cell's error bound cannot serve;
 *   5. lens_recompute_item (lens_mixed.h): float64 for the flagged pixels, which the flags listed.
 * The cubic Lagrange weights of nodes -1, 0, 1, 2 at fraction t / step of a cell come from the host
 * (weights[4 t .. 4 t + 3]), as the cpu model uses them.
 *
 * Galaxies are indexed as the float64 galaxy tables: SIE rows first, then dPIE rows. Node (a, c) of the
 * lattice sits on pixel ((a - 1) step, (c - 1) step) of the grid; pixel i lies in node column i / step + 1 at
 * fraction (i % step) / step, and the interpolation uses node columns i / step .. i / step + 3. */

/* One node of one galaxy's table: item gid is node (gid % side^2) of the side x side box of galaxy
 * gid / side^2, whose first node column and row are info[4 g + 2], info[4 g + 3]. */
ASTRO_FN void lens_split_nodes_item(size_t gid, int n_galaxies, int side, int step,
                                    ASTRO_GLOBAL const double *ASTRO_RESTRICT info,
                                    ASTRO_GLOBAL const double *ASTRO_RESTRICT sie, int n_sie,
                                    ASTRO_GLOBAL const double *ASTRO_RESTRICT dpie, double h,
                                    ASTRO_GLOBAL double *ASTRO_RESTRICT table)
{
    const size_t area = (size_t)side * (size_t)side;
    if (gid >= area * (size_t)n_galaxies) return;
    const int g = (int)(gid / area), q = (int)(gid % area);
    const double a = info[4 * g + 2] + (double)(q % side), c = info[4 * g + 3] + (double)(q / side);
    double gx = 0, gy = 0;
    lens_halo_add_f64(g, (a - 1) * step, (c - 1) * step, sie, n_sie, dpie, h, &gx, &gy, 1);
    table[2 * gid] = gx;
    table[2 * gid + 1] = gy;
}

/* A band's float64 field keeps rows [0, rows_main) in (gx, gy) and the one row after them, which only the
 * flags' y differences read, apart in (next_gx, next_gy): a gradient job returns exactly its band's rows. */
#define LENS_SPLIT_AT(main, next, r, i) ((r) < rows_main ? (main)[(size_t)(r) * nx + (i)] : (next)[i])

/* The y-pass of the separable interpolation, once per pixel row: item gid is node column a of band row r
 * (gid = r nodes + a), line = sum over v of wy[v] * coarse(a, c - 1 + v) with c = j / step + 1 the node row of
 * pixel row j = row0 + r (coarse holds the lattice's field from node row c_first, float32 or float64 as the
 * plan chose), stored as a float64 (x, y) pair. The pixels of the row then read 4 pairs each instead of 16. */
#define LENS_SPLIT_LINES_ITEM(NAME, T)                                                                          \
    ASTRO_FN void NAME(size_t gid, int nodes, int rows, int row0, int step, int c_first,                        \
                       ASTRO_GLOBAL const T *ASTRO_RESTRICT coarse_gx, ASTRO_GLOBAL const T *ASTRO_RESTRICT coarse_gy, \
                       ASTRO_GLOBAL const double *ASTRO_RESTRICT weights, ASTRO_GLOBAL double *ASTRO_RESTRICT lines) \
    {                                                                                                           \
        if (gid >= (size_t)nodes * (size_t)rows) return;                                                       \
        const unsigned int q = (unsigned int)gid, r = q / (unsigned int)nodes, a = q - r * (unsigned int)nodes; \
        const int j = row0 + (int)r, c = j / step + 1;                                                          \
        ASTRO_GLOBAL const double *wy = weights + 4 * (j - (c - 1) * step);                                    \
        double sx = 0, sy = 0;                                                                                  \
        for (int v = 0; v < 4; ++v) {                                                                           \
            const size_t at = (size_t)(c - 1 + v - c_first) * (size_t)nodes + a;                               \
            sx += wy[v] * (double)coarse_gx[at];                                                                \
            sy += wy[v] * (double)coarse_gy[at];                                                                \
        }                                                                                                       \
        lines[2 * gid] = sx;                                                                                    \
        lines[2 * gid + 1] = sy;                                                                                \
    }
LENS_SPLIT_LINES_ITEM(lens_split_lines_item, float)
LENS_SPLIT_LINES_ITEM(lens_split_lines_f64_item, double)

/* Pixel gid of a band of `rows` rows starting at grid row row0 (x fastest):
 *   clusters (float64 tables cl_sie, cl_dpie) + the interpolant of the coarse galaxy field (the x-pass over the
 *   row's line, `nodes` pairs per band row), then for each galaxy of the pixel's cell list within `radius` arcsec:
 *   + its exact deflection - the interpolant of its own node table. Sums in float64. */
#define LENS_SPLIT_PIXEL_PARAMS                                                                                  \
    int nx, int rows, int row0, int step, int nodes,                                                 \
        ASTRO_GLOBAL const double *ASTRO_RESTRICT lines, ASTRO_GLOBAL const double *ASTRO_RESTRICT cl_sie,    \
        int n_cl_sie, ASTRO_GLOBAL const double *ASTRO_RESTRICT cl_dpie, int n_cl_dpie,                        \
        ASTRO_GLOBAL const double *ASTRO_RESTRICT weights, int cells_x,                                        \
        ASTRO_GLOBAL const int *ASTRO_RESTRICT cell_start, ASTRO_GLOBAL const int *ASTRO_RESTRICT cell_galaxies, \
        ASTRO_GLOBAL const double *ASTRO_RESTRICT info, ASTRO_GLOBAL const double *ASTRO_RESTRICT table,       \
        int side, ASTRO_GLOBAL const double *ASTRO_RESTRICT sie, int n_sie,                                    \
        ASTRO_GLOBAL const double *ASTRO_RESTRICT dpie, double radius, double first_coord, double h,          \
        int rows_main, ASTRO_GLOBAL double *ASTRO_RESTRICT gx_out, ASTRO_GLOBAL double *ASTRO_RESTRICT gy_out, \
        ASTRO_GLOBAL double *ASTRO_RESTRICT next_gx, ASTRO_GLOBAL double *ASTRO_RESTRICT next_gy
#define LENS_SPLIT_PIXEL_ARGS                                                                                    \
    nx, rows, row0, step, nodes, lines, cl_sie, n_cl_sie, cl_dpie, n_cl_dpie, weights, cells_x,  \
        cell_start, cell_galaxies, info, table, side, sie, n_sie, dpie, radius, first_coord, h, rows_main,      \
        gx_out, gy_out, next_gx, next_gy

ASTRO_FN_INLINED void lens_split_pixel_body(size_t gid, LENS_SPLIT_PIXEL_PARAMS, const int with_dpie)
{
    if (gid >= (size_t)nx * (size_t)rows) return;
    /* 32-bit index arithmetic (a band holds fewer than 2^32 pixels): 64-bit division is several times dearer. */
    const unsigned int q = (unsigned int)gid, r = q / (unsigned int)nx, ui = q - r * (unsigned int)nx;
    const int i = (int)ui, j = row0 + (int)r;
    const int a = i / step + 1, c = j / step + 1;
    ASTRO_GLOBAL const double *wx = weights + 4 * (i - (a - 1) * step), *wy = weights + 4 * (j - (c - 1) * step);
    /* The clusters in float64: the few halos with the largest deflections, whose float32 rounding would
     * otherwise be most of the pixel's error bound. */
    double gx = 0, gy = 0;
    for (int k = 0; k < n_cl_sie + n_cl_dpie; ++k)
        lens_halo_add_f64(k, (double)i, (double)j, cl_sie, n_cl_sie, cl_dpie, h, &gx, &gy, with_dpie);
    ASTRO_GLOBAL const double *line = lines + 2 * ((size_t)r * (size_t)nodes + (size_t)(a - 1));
    for (int u = 0; u < 4; ++u) {
        gx += wx[u] * line[2 * u];
        gy += wx[u] * line[2 * u + 1];
    }
    const double x = first_coord + i * h, y = first_coord + j * h, r2 = radius * radius;
    const int cell = (c - 1) * cells_x + a - 1;
    for (int k = cell_start[cell]; k < cell_start[cell + 1]; ++k) {
        const int g = cell_galaxies[k];
        const double dx = x - info[4 * g], dy = y - info[4 * g + 1];
        if (dx * dx + dy * dy > r2) continue;
        lens_halo_add_f64(g, (double)i, (double)j, sie, n_sie, dpie, h, &gx, &gy, with_dpie);
        /* Its own interpolant, from its table (box origin info[4 g + 2], info[4 g + 3]). */
        const int u0 = a - 1 - (int)info[4 * g + 2], v0 = c - 1 - (int)info[4 * g + 3];
        ASTRO_GLOBAL const double *t = table + 2 * ((size_t)g * side * side + (size_t)v0 * side + u0);
        for (int v = 0; v < 4; ++v) {
            double sx = 0, sy = 0;
            for (int u = 0; u < 4; ++u) {
                sx += wx[u] * t[2 * (v * side + u)];
                sy += wx[u] * t[2 * (v * side + u) + 1];
            }
            gx -= wy[v] * sx;
            gy -= wy[v] * sy;
        }
    }
    if (j - row0 < rows_main) {
        gx_out[gid] = gx;
        gy_out[gid] = gy;
    } else {
        next_gx[i] = gx;
        next_gy[i] = gy;
    }
}

/* The kernels' parameters are LENS_SPLIT_PIXEL_PARAMS in every dialect. */
ASTRO_FN void lens_split_pixel_item(size_t gid, LENS_SPLIT_PIXEL_PARAMS)
{
    lens_split_pixel_body(gid, LENS_SPLIT_PIXEL_ARGS, 1);
}
ASTRO_FN void lens_split_pixel_sie_item(size_t gid, LENS_SPLIT_PIXEL_PARAMS)
{
    lens_split_pixel_body(gid, LENS_SPLIT_PIXEL_ARGS, 0);
}

/* Flags pixel gid of a band's float64 split field (rows [0, rows) flagged, rows [0, rows_ext) computed, the
 * last of them apart when rows_main < rows_ext):
 * flagged when |h - delta_1|, |h - delta_2| or the smaller |eigenvalue| of the symmetrised h A is below the
 * limit of the pixel's cell (h / the magnification its error bound can serve; lens_mixed.h defines the
 * deltas, forward differences, backward on the last column and computed row). */
ASTRO_FN void lens_split_flag_item(size_t gid, ASTRO_GLOBAL const double *ASTRO_RESTRICT gx,
                                   ASTRO_GLOBAL const double *ASTRO_RESTRICT gy,
                                   ASTRO_GLOBAL const double *ASTRO_RESTRICT next_gx,
                                   ASTRO_GLOBAL const double *ASTRO_RESTRICT next_gy, int nx, int rows, int rows_main,
                                   int rows_ext,
                                   int row0, int step, int cells_x, ASTRO_GLOBAL const double *ASTRO_RESTRICT limit,
                                   double h, ASTRO_GLOBAL unsigned int *ASTRO_RESTRICT list,
                                   ASTRO_GLOBAL unsigned int *counter)
{
    if (gid >= (size_t)nx * (size_t)rows) return;
    const unsigned int q = (unsigned int)gid, ur = q / (unsigned int)nx;
    const int r = (int)ur, i = (int)(q - ur * (unsigned int)nx);
    const size_t p = gid;
    int flagged = 0;
    if (nx > 1 && rows_ext > 1) {
        const int fwd_x = i + 1 < nx, fwd_y = r + 1 < rows_ext;
        const int ix = fwd_x ? i + 1 : i - 1, ry = fwd_y ? r + 1 : r - 1;
        const double sx = fwd_x ? 1.0 : -1.0, sy = fwd_y ? 1.0 : -1.0;
        const double d1 = sx * (gx[p - i + ix] - gx[p]), d4 = sx * (gy[p - i + ix] - gy[p]);
        const double d2 = sy * (LENS_SPLIT_AT(gy, next_gy, ry, i) - gy[p]);
        const double d3 = sy * (LENS_SPLIT_AT(gx, next_gx, ry, i) - gx[p]);
        const double lim = limit[((row0 + r) / step) * cells_x + i / step];
        const double A = h - d1, C = h - d2;
        flagged = ASTRO_FABS(A) < lim || ASTRO_FABS(C) < lim ||
                  lens_smaller_eigenvalue_f64(A, -0.5 * (d3 + d4), C) < lim;
    }
    if (flagged) list[ASTRO_ATOMIC_INC(counter)] = (unsigned int)p;
}
