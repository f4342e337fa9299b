//! Lomb-Scargle periodograms (seed 001: Townsend 2010, culsp; research/lombscargle.md; DESIGN.md 4.2).
//!
//! Direct O(N_t N_f) sums, one work-item per frequency, the series staged through local memory in chunks.
//! The phase f t is reduced exactly in 64-bit fixed point before float32 sincos (research 2: the rounding of
//! the float32 product f t, not sincos, dominates culsp's error).

pub mod fap;
pub mod generate;
pub mod io;

/// One light curve: times (days), values (flux or magnitude) and optional 1-sigma errors.
#[derive(Debug, Clone, PartialEq)]
pub struct LightCurve {
    /// Object name (file name, or the object id of a multi-object table).
    pub name: String,
    pub t: Vec<f64>,
    pub y: Vec<f64>,
    pub dy: Option<Vec<f64>>,
}

/// The frequencies of one periodogram, in cycles per time unit.
#[derive(Debug, Clone, PartialEq)]
pub enum FrequencyGrid {
    /// f_k = f0 + k df, k = 0..n (culsp's grid has f0 = df).
    Uniform { f0: f64, df: f64, n: usize },
    /// Any user-given frequencies, positive and finite.
    Given(Vec<f64>),
}

impl FrequencyGrid {
    pub fn len(&self) -> usize {
        match self {
            FrequencyGrid::Uniform { n, .. } => *n,
            FrequencyGrid::Given(f) => f.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn frequency(&self, k: usize) -> f64 {
        match self {
            FrequencyGrid::Uniform { f0, df, .. } => f0 + k as f64 * df,
            FrequencyGrid::Given(f) => f[k],
        }
    }
    pub fn max_frequency(&self) -> f64 {
        (0..self.len()).map(|k| self.frequency(k)).fold(0.0, f64::max)
    }
}

/// The signal model fitted at each frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalModel {
    /// Classic Lomb-Scargle (culsp): data centred once, no constant term in the fit (astropy `fit_mean=False`).
    FixedMean,
    /// Generalised Lomb-Scargle with a floating mean (Zechmeister & Kuerster 2009; astropy `fit_mean=True`).
    FloatingMean,
}

/// Power normalisations, as astropy's `LombScargle(normalization=...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Normalization {
    Standard,
    Model,
    Log,
    Psd,
}

/// A peak of a periodogram: a local maximum of the power.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    /// Index in the frequency grid.
    pub index: usize,
    pub frequency: f64,
    pub power: f64,
    /// False-alarm probability (Baluev) of this power, when computed.
    pub fap: Option<f64>,
}
