#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "weft/bus/pg_connection.hpp"

// The literals the PostgreSQL outbox passes as text parameters (arrays and ranges), so every
// statement keeps a fixed text and a fixed number of parameters.

namespace weft::bus::detail {

/// A text[] literal: every element double-quoted, `"` and `\` escaped with a backslash.
inline auto text_array(const std::vector<std::string>& v) -> std::string {
    std::string s = "{";
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i != 0) {
            s += ',';
        }
        s += '"';
        for (const char c : v[i]) {
            if (c == '"' || c == '\\') {
                s += '\\';
            }
            s += c;
        }
        s += '"';
    }
    return s + "}";
}

/// An int[] / bigint[] literal, "{1,2,3}".
inline auto int_array(const std::vector<std::int64_t>& v) -> std::string {
    std::string s = "{";
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i != 0) {
            s += ',';
        }
        s += std::to_string(v[i]);
    }
    return s + "}";
}

/// `seqs` as an int8multirange literal of inclusive runs, "{[1,4],[9,9]}": the rows a
/// relay holds are mostly a few runs of consecutive seqs, so the claim's test against
/// them is a search among a few ranges, where a bigint[] of every seq (up to 4 batches) was
/// parsed element by element on every claim.
inline auto seq_ranges(std::vector<std::int64_t> seqs) -> std::string {
    std::sort(seqs.begin(), seqs.end());
    std::string s = "{";
    std::size_t i = 0;
    while (i < seqs.size()) {
        std::size_t j = i + 1;
        while (j < seqs.size() && seqs[j] <= seqs[j - 1] + 1) {
            ++j;
        }
        if (i != 0) {
            s += ',';
        }
        s += '[' + std::to_string(seqs[i]) + ',' + std::to_string(seqs[j - 1]) + ']';
        i = j;
    }
    return s + "}";
}

/// A text parameter.
inline auto text_param(std::string v) -> pg_param { return pg_param{std::move(v), false}; }

}  // namespace weft::bus::detail
