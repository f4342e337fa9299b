//! Power normalisations and false-alarm probabilities. (Being written.)
