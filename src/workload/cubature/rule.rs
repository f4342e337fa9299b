//! The degree-9 fully symmetric cubature rule with four embedded null rules that PAGANI uses in every
//! dimension: DCUHRE's D09HRE (Berntsen, Espelid & Genz 1991, ACM TOMS 17, 437 and 452), as in Cuba's
//! Cuhre (Hahn 2005).
//!
//! Points are written in region-normalised coordinates u ∈ [−½, ½]^d (point = centre + u ⊙ width). They
//! come in nine orbits ("sets") of one generator each; every point of a set carries the same five weights
//! (R0 = the degree-9 rule, N1..N4 = null rules annihilating degree ≤ 7, 7, 5, 3). The weights are
//! polynomials in d (set 0 cubic, set 1 quadratic, sets 2 and 5 linear, sets 3, 4, 6, 7 constant, set 8
//! ∝ 2^−d), so they follow for any d from the tables at d = 5..8 (`TABLE`) by
//! Lagrange interpolation; the tests check the surplus table entries and the moment conditions for
//! d = 2..15.

// The generators and weights are kept with the digits they were published with.
#![allow(clippy::excessive_precision)]

/// Dimensions the rule supports: the fourth differences need sets 0–2 (4d + 1 points) inside the first
/// 64 points, so d ≤ 15.
pub const MIN_DIM: usize = 2;
pub const MAX_DIM: usize = 15;
/// Orbits of the rule.
pub const SETS: usize = 9;
/// Columns: R0 and the four null rules.
pub const RULES: usize = 5;

/// Generators a1..a5 (region-normalised).
pub const A1: f64 = 0.477_953_657_902_269_506_2;
pub const A2: f64 = 0.203_028_587_369_119_867_8;
pub const A3: f64 = 0.447_627_354_626_178_128_8;
pub const A4: f64 = 0.125;
pub const A5: f64 = 0.343_037_898_780_878_145_7;

/// D09HRE's weights per point for d = 5, 6, 7, 8 (rows = sets, columns = R0, N1..N4), to 17 significant
/// digits.
const TABLE: [[[f64; RULES]; SETS]; 4] = [
    [
        [
            0.11550501620287468,
            0.60935728386132892,
            0.66359838238346647,
            -26.589340862545001,
            -0.93947286550533182,
        ],
        [
            -0.16892800943532177,
            -0.096990971599291806,
            0.11168007409543529,
            2.8475718890961215,
            0.35132479436556752,
        ],
        [
            -0.011272611228261259,
            -0.081816665584016984,
            0.20119262760972473,
            3.4019253678903572,
            0.011272611228261259,
        ],
        [
            0.057693384490973484,
            0.034999626602143584,
            -0.057693384490973484,
            -1.3868627719278281,
            -0.057693384490973484,
        ],
        [0.0, 0.0, -0.23866687325750088, 0.0, 0.0],
        [
            -0.0021763649817842859,
            -0.0072102028143402573,
            0.0072102028143402573,
            0.090140834892657923,
            0.0021763649817842859,
        ],
        [
            0.022543144647178919,
            0.013675773263272822,
            -0.013675773263272822,
            -0.32544759695960124,
            -0.022543144647178919,
        ],
        [
            0.0017708782258391339,
            0.0010743012775049343,
            -0.0010743012775049343,
            0.0017708782258391339,
            -0.0017708782258391339,
        ],
        [
            0.0078593785922858733,
            -0.0019648446480714683,
            0.0019648446480714683,
            0.0078593785922858733,
            -0.0078593785922858733,
        ],
    ],
    [
        [
            0.51799215999167525,
            0.9689442696524414,
            0.5586025298413132,
            -38.571794294575191,
            -1.706753579154624,
        ],
        [
            -0.20257805586275451,
            -0.1056249073871372,
            0.1203140098832807,
            3.325268926133365,
            0.38497484079300026,
        ],
        [
            -0.056358900522619076,
            -0.10916821211056263,
            0.22854417413627037,
            4.0528205618095594,
            0.056358900522619076,
        ],
        [
            0.057693384490973484,
            0.034999626602143584,
            -0.057693384490973484,
            -1.3868627719278281,
            -0.057693384490973484,
        ],
        [0.0, 0.0, -0.23866687325750088, 0.0, 0.0],
        [
            -0.0057181214334625537,
            -0.0093588053693501247,
            0.0093588053693501247,
            0.086599078440979665,
            0.0057181214334625537,
        ],
        [
            0.022543144647178919,
            0.013675773263272822,
            -0.013675773263272822,
            -0.32544759695960124,
            -0.022543144647178919,
        ],
        [
            0.0017708782258391339,
            0.0010743012775049343,
            -0.0010743012775049343,
            0.0017708782258391339,
            -0.0017708782258391339,
        ],
        [
            0.0039296892961429367,
            -0.00098242232403573417,
            0.00098242232403573417,
            0.0039296892961429367,
            -0.0039296892961429367,
        ],
    ],
    [
        [
            1.0637849494173435,
            1.3919078098522966,
            0.39023012289041725,
            -52.825599214324996,
            -2.6173399384407836,
        ],
        [
            -0.22914458938683074,
            -0.10996163806496284,
            0.12465074056110634,
            3.8100494760739645,
            0.41154137431707649,
        ],
        [
            -0.10144518981697695,
            -0.13651975863710827,
            0.25589572066281602,
            4.7037157557287621,
            0.10144518981697695,
        ],
        [
            0.057693384490973484,
            0.034999626602143584,
            -0.057693384490973484,
            -1.3868627719278281,
            -0.057693384490973484,
        ],
        [0.0, 0.0, -0.23866687325750088, 0.0, 0.0],
        [
            -0.0092598778851408214,
            -0.011507407924359994,
            0.011507407924359994,
            0.083057321989301394,
            0.0092598778851408214,
        ],
        [
            0.022543144647178919,
            0.013675773263272822,
            -0.013675773263272822,
            -0.32544759695960124,
            -0.022543144647178919,
        ],
        [
            0.0017708782258391339,
            0.0010743012775049343,
            -0.0010743012775049343,
            0.0017708782258391339,
            -0.0017708782258391339,
        ],
        [
            0.0019648446480714683,
            -0.00049121116201786708,
            0.00049121116201786708,
            0.0019648446480714683,
            -0.0019648446480714683,
        ],
    ],
    [
        [
            1.7387163586731664,
            1.8696534942408545,
            0.16707557175081833,
            -69.364922647601091,
            -3.6570649175570979,
        ],
        [
            -0.24862761000755035,
            -0.11000116363276877,
            0.12469026612891226,
            4.3019135389179208,
            0.4310243949377961,
        ],
        [
            -0.14653147911133477,
            -0.16387130516365392,
            0.28324726718936166,
            5.3546109496479648,
            0.14653147911133477,
        ],
        [
            0.057693384490973484,
            0.034999626602143584,
            -0.057693384490973484,
            -1.3868627719278281,
            -0.057693384490973484,
        ],
        [0.0, 0.0, -0.23866687325750088, 0.0, 0.0],
        [
            -0.012801634336819089,
            -0.013656010479369863,
            0.013656010479369863,
            0.079515565537623123,
            0.012801634336819089,
        ],
        [
            0.022543144647178919,
            0.013675773263272822,
            -0.013675773263272822,
            -0.32544759695960124,
            -0.022543144647178919,
        ],
        [
            0.0017708782258391339,
            0.0010743012775049343,
            -0.0010743012775049343,
            0.0017708782258391339,
            -0.0017708782258391339,
        ],
        [
            0.00098242232403573417,
            -0.00024560558100893354,
            0.00024560558100893354,
            0.00098242232403573417,
            -0.00098242232403573417,
        ],
    ],
];
const TABLE_D0: usize = 5;

/// Degree in d of each set's weights (`None`: set 8, whose weights are c·2^−d).
const SET_DEGREE: [Option<usize>; SETS] = [
    Some(3),
    Some(2),
    Some(1),
    Some(0),
    Some(0),
    Some(1),
    Some(0),
    Some(0),
    None,
];

/// Weight of one set and column at dimension d.
pub fn weight(set: usize, rule: usize, d: usize) -> f64 {
    match SET_DEGREE[set] {
        None => TABLE[0][set][rule] * (1u64 << TABLE_D0) as f64 / (1u64 << d) as f64,
        Some(deg) => {
            // Lagrange interpolation through d = 5 ..= 5 + deg.
            let x = d as f64;
            (0..=deg)
                .map(|j| {
                    let xj = (TABLE_D0 + j) as f64;
                    let basis: f64 = (0..=deg)
                        .filter(|&m| m != j)
                        .map(|m| {
                            let xm = (TABLE_D0 + m) as f64;
                            (x - xm) / (xj - xm)
                        })
                        .product();
                    TABLE[j][set][rule] * basis
                })
                .sum()
        }
    }
}

/// Number of points of each set at dimension d.
pub fn set_sizes(d: usize) -> [usize; SETS] {
    let (n, pairs) = (d, d * (d - 1));
    [
        1,
        2 * n,
        2 * n,
        2 * n,
        2 * n,
        2 * pairs,
        4 * pairs,
        4 * pairs * (d.saturating_sub(2)) / 3,
        1 << d,
    ]
}

/// The rule for one dimension: every point (set-major, sets 0–2 first so the fourth differences read
/// points 0..4d+1), its set, the weights and the null-rule combination constants.
#[derive(Debug, Clone)]
pub struct Rule {
    pub dim: usize,
    /// Point-major coordinates in [−½, ½]: `points[p * dim + j]`.
    pub points: Vec<f64>,
    /// Set of each point.
    pub set_of: Vec<u8>,
    /// `weights[set][rule]` per point for a unit-volume region.
    pub weights: [[f64; RULES]; SETS],
    /// σ_{s,r} and ν_{s,r} of the error logic (r = 0..3 for the null-rule pairs (N1,N2), (N2,N3), (N3,N4)).
    pub sigma: [[f64; 3]; SETS],
    pub nu: [[f64; 3]; SETS],
}

/// Ratio of the two axis generators used by the fourth difference, ρ = (a2/a1)².
pub const RHO: f64 = (A2 / A1) * (A2 / A1);

impl Rule {
    /// Builds the rule for `dim` in [`MIN_DIM`, `MAX_DIM`].
    pub fn new(dim: usize) -> Result<Rule, String> {
        if !(MIN_DIM..=MAX_DIM).contains(&dim) {
            return Err(format!(
                "dimension {dim} is outside the degree-9 rule's range {MIN_DIM}..={MAX_DIM}"
            ));
        }
        let mut points = Vec::new();
        let mut set_of = Vec::new();
        let mut push = |set: usize, coords: &[(usize, f64)]| {
            let mut p = vec![0.0; dim];
            for &(axis, v) in coords {
                p[axis] = v;
            }
            points.extend_from_slice(&p);
            set_of.push(set as u8);
        };
        push(0, &[]);
        // Sets 1..4: ±a on one axis, axis-major so point 1 + 2k (+) and 2 + 2k (−) are axis k of set 1.
        for (set, a) in [(1, A1), (2, A2), (3, A3), (4, A4)] {
            for k in 0..dim {
                push(set, &[(k, a)]);
                push(set, &[(k, -a)]);
            }
        }
        let signs2 = [(1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)];
        for i in 0..dim {
            for j in i + 1..dim {
                for (si, sj) in signs2 {
                    push(5, &[(i, si * A1), (j, sj * A1)]);
                }
            }
        }
        for i in 0..dim {
            for j in 0..dim {
                if i != j {
                    for (si, sj) in signs2 {
                        push(6, &[(i, si * A1), (j, sj * A2)]);
                    }
                }
            }
        }
        for i in 0..dim {
            for j in i + 1..dim {
                for k in j + 1..dim {
                    for s in 0..8u32 {
                        let sign = |b: u32| if s >> b & 1 == 0 { A1 } else { -A1 };
                        push(7, &[(i, sign(0)), (j, sign(1)), (k, sign(2))]);
                    }
                }
            }
        }
        for s in 0..1u64 << dim {
            let coords: Vec<(usize, f64)> = (0..dim)
                .map(|k| (k, if s >> k & 1 == 0 { A5 } else { -A5 }))
                .collect();
            push(8, &coords);
        }
        let mut weights = [[0.0; RULES]; SETS];
        for (set, row) in weights.iter_mut().enumerate() {
            for (rule, w) in row.iter_mut().enumerate() {
                *w = weight(set, rule, dim);
            }
        }
        let sizes = set_sizes(dim);
        let mut sigma = [[0.0; 3]; SETS];
        let mut nu = [[0.0; 3]; SETS];
        for s in 0..SETS {
            for r in 0..3 {
                let (lo, hi) = (weights[s][r + 1], weights[s][r + 2]);
                let sg = if lo == 0.0 { 100.0 } else { -hi / lo };
                let norm: f64 = (0..SETS)
                    .map(|x| sizes[x] as f64 * (weights[x][r + 2] + sg * weights[x][r + 1]).abs())
                    .sum();
                sigma[s][r] = sg;
                nu[s][r] = 1.0 / norm;
            }
        }
        Ok(Rule {
            dim,
            points,
            set_of,
            weights,
            sigma,
            nu,
        })
    }

    pub fn len(&self) -> usize {
        self.set_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set_of.is_empty()
    }

    /// Estimate (per unit volume) and null-rule error from the five weighted sums S_0..S_4 (as in DCUHRE):
    /// the error is E1 when the null-rule magnitudes decay (5·E1 ≤ E2 and 5·E2 ≤ E3), else 5·max(E1, E2, E3).
    pub fn estimate_and_error(&self, sums: &[f64; RULES]) -> (f64, f64) {
        let mut e = [0.0f64; 3];
        for (r, er) in e.iter_mut().enumerate() {
            for s in 0..SETS {
                *er = er
                    .max(self.sigma[s][r].mul_add(sums[r + 1], sums[r + 2]).abs() * self.nu[s][r]);
            }
        }
        let err = if 5.0 * e[0] <= e[1] && 5.0 * e[1] <= e[2] {
            e[0]
        } else {
            5.0 * e[0].max(e[1]).max(e[2])
        };
        (sums[0], err)
    }
}

/// Split axis from the values at the centre and the ±a1, ±a2 axis points (the first 4d + 1 points): the
/// largest fourth difference, first on ties; the widest axis when every difference is zero.
pub fn split_axis(f_axis: &[f64], widths: &[f64]) -> usize {
    let d = widths.len();
    let centre = f_axis[0];
    let mut best = (0usize, 0.0f64);
    for k in 0..d {
        let a1 = f_axis[1 + 2 * k] + f_axis[2 + 2 * k];
        let a2 = f_axis[1 + 2 * d + 2 * k] + f_axis[2 + 2 * d + 2 * k];
        let diff = (2.0 * (1.0 - RHO))
            .mul_add(centre, RHO.mul_add(a1, -a2))
            .abs();
        if diff > best.1 {
            best = (k, diff);
        }
    }
    if best.1 > 0.0 {
        return best.0;
    }
    let mut widest = 0;
    for k in 1..d {
        if widths[k] > widths[widest] {
            widest = k;
        }
    }
    widest
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ∫ over [−½, ½]^d of Π x_j^{e_j}.
    fn exact_moment(exps: &[u32]) -> f64 {
        exps.iter()
            .map(|&e| {
                if e % 2 == 1 {
                    0.0
                } else {
                    1.0 / ((e + 1) as f64 * 2f64.powi(e as i32))
                }
            })
            .product()
    }

    fn rule_moment(rule: &Rule, column: usize, exps: &[u32]) -> f64 {
        let d = rule.dim;
        (0..rule.len())
            .map(|p| {
                let w = rule.weights[rule.set_of[p] as usize][column];
                let m: f64 = (0..d)
                    .map(|j| rule.points[p * d + j].powi(exps[j] as i32))
                    .product();
                w * m
            })
            .sum()
    }

    /// Every exponent pattern (sorted, up to symmetry) of total degree ≤ `deg` over at most 5 axes.
    fn patterns(d: usize, deg: u32) -> Vec<Vec<u32>> {
        fn rec(out: &mut Vec<Vec<u32>>, cur: &mut Vec<u32>, left: u32, max: u32, d: usize) {
            out.push(cur.clone());
            if cur.len() == d.min(5) {
                return;
            }
            for e in 1..=left.min(max) {
                cur.push(e);
                rec(out, cur, left - e, e, d);
                cur.pop();
            }
        }
        let mut out = Vec::new();
        rec(&mut out, &mut Vec::new(), deg, deg, d);
        out.into_iter()
            .map(|mut p| {
                p.resize(d, 0);
                p
            })
            .collect()
    }

    #[test]
    fn point_counts_match_the_published_totals() {
        for (d, n) in [(5, 273), (6, 453), (7, 717), (8, 1105)] {
            let rule = Rule::new(d).unwrap();
            assert_eq!(rule.len(), n, "d = {d}");
            assert_eq!(set_sizes(d).iter().sum::<usize>(), n);
        }
        assert!(Rule::new(1).is_err() && Rule::new(16).is_err());
    }

    #[test]
    #[allow(clippy::needless_range_loop)]
    fn interpolated_weights_reproduce_the_surplus_table_entries() {
        for (t, d) in (5..=8).enumerate() {
            for set in 0..SETS {
                for rule in 0..RULES {
                    let (want, got) = (TABLE[t][set][rule], weight(set, rule, d));
                    assert!(
                        (want - got).abs() <= 1e-14 * want.abs().max(1e-3),
                        "d {d} set {set} rule {rule}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn basic_rule_has_degree_9_and_null_rules_annihilate_their_degrees() {
        // N1, N2 annihilate degree ≤ 7, N3 degree ≤ 5, N4 degree ≤ 3 (Berntsen et al. 1991).
        let null_degree = [7u32, 7, 5, 3];
        for d in MIN_DIM..=MAX_DIM {
            let rule = Rule::new(d).unwrap();
            for exps in patterns(d, 9) {
                let exact = exact_moment(&exps);
                let got = rule_moment(&rule, 0, &exps);
                assert!(
                    (got - exact).abs() <= 1e-12,
                    "d {d} R0 moment {exps:?}: {got} vs {exact}"
                );
                let degree: u32 = exps.iter().sum();
                for (r, &nd) in null_degree.iter().enumerate() {
                    if degree <= nd {
                        let got = rule_moment(&rule, r + 1, &exps);
                        assert!(
                            got.abs() <= 1e-11,
                            "d {d} N{} moment {exps:?}: {got}",
                            r + 1
                        );
                    }
                }
            }
            // Degree 10 is not integrated exactly: the rule is not trivially exact.
            let mut x10 = vec![0u32; d];
            x10[0] = 10;
            assert!((rule_moment(&rule, 0, &x10) - exact_moment(&x10)).abs() > 1e-9);
        }
    }

    #[test]
    fn fourth_difference_picks_the_curved_axis() {
        let d = 3;
        let rule = Rule::new(d).unwrap();
        // f = x_1^4 (axis 1) is curved only along axis 1.
        let f: Vec<f64> = (0..4 * d + 1)
            .map(|p| rule.points[p * d + 1].powi(4))
            .collect();
        assert_eq!(split_axis(&f, &[1.0, 1.0, 1.0]), 1);
        // A linear function has no fourth difference: the widest axis is split.
        let f: Vec<f64> = (0..4 * d + 1).map(|p| rule.points[p * d]).collect();
        assert_eq!(split_axis(&f, &[1.0, 1.0, 2.0]), 2);
    }
}
