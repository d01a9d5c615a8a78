//! Models live in tests/; each follows a C++ file line by line.
