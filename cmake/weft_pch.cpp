// The translation unit that builds the libraries' precompiled header (CMakeLists.txt: WEFT_PCH).
