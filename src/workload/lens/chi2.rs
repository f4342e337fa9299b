//! Image-plane χ² (research/lens.md §2.5). Being written.
