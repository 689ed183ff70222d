//! NumPy 2.x streams (in progress).
