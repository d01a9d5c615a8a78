#pragma once

// Command-line walking shared by bench_client, bench_server and bench_file_io: the seed's
// `-flag value` options and the weft-bench protocol's `SCENARIO key=value ...`. A value that
// does not parse (std::stoi and friends throw) ends the program through `usage`, naming it.
// `usage(std::string)` must not return (it prints and exits).

#include <cstdlib>
#include <exception>
#include <string>

namespace weft::bench {

/// The weft-bench protocol's parameters, argv[2] on: on(key, value) for each `key=value`.
template <typename On, typename Usage>
void each_key_value(int argc, char** argv, On&& on, Usage&& usage) {
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        const auto eq = a.find('=');
        if (eq == std::string::npos) {
            usage("bad parameter " + a + " (want key=value)");
            std::abort();  // not reached
        }
        try {
            on(a.substr(0, eq), a.substr(eq + 1));
        } catch (const std::exception&) {
            usage("bad value in " + a);
        }
    }
}

/// The seed's options, argv[1] on: on(flag, next) for each, where next() consumes and returns
/// the argument after the flag (a flag without one ends the program through `usage`).
template <typename On, typename Usage>
void each_flag(int argc, char** argv, On&& on, Usage&& usage) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                usage("missing value after " + a);
                std::abort();  // not reached
            }
            return argv[++i];
        };
        try {
            on(a, next);
        } catch (const std::exception&) {
            usage("bad value after " + a);
        }
    }
}

}  // namespace weft::bench
