#pragma once

// The test certificates scripts/brokers.sh made for its TLS listeners (a CA, the brokers' leaf,
// a client certificate), found by asking the script (`certs` makes them if needed and prints
// their directory), and a CA the brokers never heard of, for the refusals.

#include <cstdio>
#include <stdexcept>
#include <string>

#include "tls/cert_factory.hpp"
#include "tls/child_process.hpp"
#include "weft/bus/broker_tls.hpp"

namespace weft::bus::test {

inline auto broker_tls_dir() -> std::string {
    static const std::string dir = [] {
        const std::string cmd = std::string("'") + WEFT_BROKERS_SCRIPT + "' certs";
        std::FILE* p = ::popen(cmd.c_str(), "r");
        if (p == nullptr) {
            throw std::runtime_error(cmd + ": cannot run");
        }
        std::string out;
        char buf[512];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) {
            out.append(buf, n);
        }
        if (::pclose(p) != 0 || out.empty()) {
            throw std::runtime_error(cmd + " failed: " + out);
        }
        while (!out.empty() && out.back() == '\n') {
            out.pop_back();
        }
        return out.substr(out.rfind('\n') + 1);  // the last line
    }();
    return dir;
}

/// TLS with the brokers' CA, and the client certificate unless `client_certificate` is false.
inline auto broker_tls_files(bool client_certificate = true) -> broker_tls {
    const std::string d = broker_tls_dir();
    broker_tls t;
    t.enabled = true;
    t.ca_file = d + "/ca.pem";
    if (client_certificate) {
        t.cert_file = d + "/client.pem";
        t.key_file = d + "/client.key";
    }
    return t;
}

/// A CA file holding a CA that issued none of the brokers' certificates.
inline auto unrelated_ca_file() -> std::string {
    static const std::string path =
        weft::test::write_temp_file("unrelated-ca.pem",
                                    weft::test::make_ca("unrelated CA").cert_pem())
            .string();
    return path;
}

}  // namespace weft::bus::test
