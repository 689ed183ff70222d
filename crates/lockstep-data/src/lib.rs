//! Reproducible data loading (in progress).
