#pragma once

// The Go program of the interop tests (tests/interop/go, built by the build: tests/CMakeLists.txt);
// and running a command with its output in the test log.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace weft::interop {

/// Runs `command` through the shell; its exit status (-1 when it did not exit).
inline auto run(const std::string& command) -> int {
    std::printf("$ %s\n", command.c_str());
    std::fflush(stdout);
    const int status = std::system((command + " 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// What `command` wrote to standard output (and its error output), read through popen.
inline auto output_of(const std::string& command) -> std::string {
    std::printf("$ %s\n", command.c_str());
    std::string out;
    if (FILE* p = ::popen((command + " 2>&1").c_str(), "r")) {
        char buf[4096];
        for (std::size_t n = 0; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) {
            out.append(buf, n);
        }
        ::pclose(p);
    }
    std::printf("%s\n", out.c_str());
    return out;
}

/// The built program's path (WEFT_INTEROP_GO_BIN), or "" when it is not there.
inline auto go_program() -> std::string {
    const std::string bin = WEFT_INTEROP_GO_BIN;
    return ::access(bin.c_str(), X_OK) == 0 ? bin : std::string();
}

}  // namespace weft::interop
