// libFuzzer: the envelope decoder over arbitrary bytes. Checks its promises: no crash, over-read
// or UB (ASan, UBSan); a failure is one of the two decode errors; what decodes re-encodes to
// exactly the input (the encoding is canonical: decode accepts only what encode writes) and
// prints as JSON; decode_routing (the outbox relays' check) accepts and refuses exactly what
// decode does, with the same error, and reads the same id, topic and key.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "weft/bus/envelope_codec.hpp"
#include "weft/bus/errc.hpp"

namespace {

void check(bool ok) {
    if (!ok) {
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace weft::bus;
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    auto r = decode(in);
    auto routing = decode_routing(in);
    check(static_cast<bool>(routing) == static_cast<bool>(r));
    if (!r) {
        check(r.error() == bus_errc::malformed_envelope ||
              r.error() == bus_errc::unsupported_version);
        check(routing.error() == r.error());
        return 0;
    }
    check(routing->id == r->id && routing->topic == r->topic && routing->key == r->key &&
          routing->bytes.data() == in.data() && routing->bytes.size() == in.size());
    check(encode(*r) == in);
    check(!to_json(*r).empty());
    return 0;
}
