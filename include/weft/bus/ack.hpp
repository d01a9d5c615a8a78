#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace weft::bus {

/// The name of a stream or topic as acks carry it: an immutable string shared by every ack of
/// that stream. A producer makes one per stream (once, not per message), so an ack costs a
/// reference-count increment where a std::string copy cost an allocation on the publishing
/// thread and a free on the reading one (a fifth of a memory-broker publish). Reads as a
/// std::string_view; compares with strings; a copy may outlive the producer and the broker.
/// Default: the empty name. Any thread may copy or read one.
///
///     const weft::bus::ack a = (co_await pub.publish(env)).value();
///     std::string_view s = a.stream;                 // or a.stream.view()
///     if (a.stream == "orders") { ... }
class stream_name {
public:
    stream_name() = default;
    explicit stream_name(std::string_view name)
        : name_(name.empty() ? nullptr : std::make_shared<const std::string>(name)) {}

    [[nodiscard]] auto view() const noexcept -> std::string_view {
        return name_ ? std::string_view(*name_) : std::string_view();
    }
    // NOLINTNEXTLINE(google-explicit-constructor): reads as the string it names
    operator std::string_view() const noexcept { return view(); }
    [[nodiscard]] auto str() const -> std::string { return std::string(view()); }
    [[nodiscard]] auto empty() const noexcept -> bool { return view().empty(); }

    friend auto operator==(const stream_name& a, const stream_name& b) noexcept -> bool {
        return a.name_ == b.name_ || a.view() == b.view();
    }
    friend auto operator==(const stream_name& a, std::string_view b) noexcept -> bool {
        return a.view() == b;
    }
    friend auto operator==(const stream_name& a, const std::string& b) noexcept -> bool {
        return a.view() == b;
    }
    friend auto operator==(const stream_name& a, const char* b) noexcept -> bool {
        return a.view() == std::string_view(b);
    }
    friend auto operator<<(std::ostream& os, const stream_name& s) -> std::ostream& {
        return os << s.view();
    }

private:
    std::shared_ptr<const std::string> name_;  // null: the empty name
};

/// The broker's receipt for a published message: where it now is. `stream` is the NATS stream
/// or Kafka topic (the topic itself on the memory broker), `sequence` the stream sequence or
/// partition offset, `partition` the Kafka partition (-1 where there is none). `duplicate`:
/// the broker already had a message with this id (de-duplication) and stored nothing new;
/// `sequence` is then the original's.
struct ack {
    stream_name stream;
    std::uint64_t sequence = 0;
    std::int32_t partition = -1;
    bool duplicate = false;
};

}  // namespace weft::bus
