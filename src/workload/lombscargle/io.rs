//! Light-curve readers and periodogram writers. (Being written.)
