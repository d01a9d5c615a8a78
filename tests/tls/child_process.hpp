#pragma once

// Runs a peer program (openssl s_client, curl) as a child process: its stdout and stderr
// captured, stdin from a string, killed by its PID if it outlives `limit`. Blocking: call it
// through weft::spawn_blocking from a task.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace weft::test {

struct child_result {
    int status = -1;  // the exit status; -1 when it was killed or did not start
    std::string output;
};

/// Whether `program` is on PATH.
inline auto have_program(const std::string& program) -> bool {
    return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

inline auto run_child(const std::vector<std::string>& argv,
                      const std::string& input = {},
                      std::chrono::seconds limit = std::chrono::seconds{30}) -> child_result {
    child_result res;
    char out_path[] = "/tmp/weft-child-out-XXXXXX";
    char in_path[] = "/tmp/weft-child-in-XXXXXX";
    const int out_fd = ::mkstemp(out_path);
    const int in_fd = ::mkstemp(in_path);
    (void)::write(in_fd, input.data(), input.size());
    ::lseek(in_fd, 0, SEEK_SET);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) {
        args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc == 0) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        int st = 0;
        for (;;) {
            const pid_t w = ::waitpid(pid, &st, WNOHANG);
            if (w == pid) {
                res.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
                break;
            }
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid, SIGKILL);
                ::waitpid(pid, &st, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds{10});
        }
    }
    ::lseek(out_fd, 0, SEEK_SET);
    char buf[4096];
    for (ssize_t n; (n = ::read(out_fd, buf, sizeof(buf))) > 0;) {
        res.output.append(buf, static_cast<std::size_t>(n));
    }
    ::close(out_fd);
    ::close(in_fd);
    ::unlink(out_path);
    ::unlink(in_path);
    return res;
}

/// A file in a fresh temporary directory holding `content` (a CA for curl --cacert).
inline auto write_temp_file(const std::string& name, const std::string& content)
    -> std::filesystem::path {
    char dir[] = "/tmp/weft-tls-XXXXXX";
    const std::filesystem::path d = ::mkdtemp(dir);
    const auto p = d / name;
    std::FILE* f = std::fopen(p.c_str(), "w");
    std::fwrite(content.data(), 1, content.size(), f);
    std::fclose(f);
    return p;
}

}  // namespace weft::test
