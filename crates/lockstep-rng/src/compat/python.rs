//! CPython 3.11 `random` (in progress).
