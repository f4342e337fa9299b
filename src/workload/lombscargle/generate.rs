//! Deterministic light-curve generators and frequency grids for the presets. (Being written.)
