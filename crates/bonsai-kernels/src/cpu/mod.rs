//! Shared CPU machinery: run-time SIMD selection and the thread pool.
