#include "scenario.hpp"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

namespace weft::bench {

params::params(int argc, char** argv) {
    for (int i = 2; i < argc; ++i) {
        const std::string arg = argv[i];
        const auto eq = arg.find('=');
        if (eq == std::string::npos) {
            fail("bad parameter '" + arg + "' (want key=value)", 2);
        }
        try {
            values_[arg.substr(0, eq)] = std::stoll(arg.substr(eq + 1));
        } catch (const std::exception&) {
            fail("bad value in '" + arg + "' (want an integer)", 2);
        }
    }
}

auto params::get(const std::string& key, std::int64_t fallback) const -> std::int64_t {
    auto it = values_.find(key);
    return it == values_.end() ? fallback : it->second;
}

void emit(const char* metric, const char* unit, double value) {
    std::printf("{\"metric\": \"%s\", \"unit\": \"%s\", \"value\": %.6g}\n", metric, unit, value);
    std::fflush(stdout);
}

void fail(const std::string& message, int code) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    std::exit(code);
}

auto rss_bytes() -> std::int64_t {
    std::ifstream in("/proc/self/status");
    std::string key;
    while (in >> key) {
        if (key == "VmRSS:") {
            std::int64_t kib = 0;
            in >> kib;
            return kib * 1024;
        }
        in.ignore(1 << 12, '\n');
    }
    return 0;
}

auto process_cpu_seconds() -> double {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto secs = [](const timeval& tv) {
        return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
    };
    return secs(ru.ru_utime) + secs(ru.ru_stime);
}

auto dispatch(int argc,
              char** argv,
              const std::map<std::string, std::function<void(const params&)>>& table) -> int {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s SCENARIO [key=value]...\nscenarios:", argv[0]);
        for (const auto& [name, fn] : table) {
            std::fprintf(stderr, " %s", name.c_str());
        }
        std::fprintf(stderr, "\n");
        return 2;
    }
    auto it = table.find(argv[1]);
    if (it == table.end()) {
        std::fprintf(stderr, "error: unknown scenario '%s'\n", argv[1]);
        return 2;
    }
    it->second(params(argc, argv));
    return 0;
}

}  // namespace weft::bench
