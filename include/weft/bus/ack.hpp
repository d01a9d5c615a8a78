#pragma once

#include <cstdint>
#include <string>

namespace weft::bus {

/// The broker's receipt for a published message: where it now is. `stream` is the NATS stream
/// or Kafka topic (the topic itself on the memory broker), `sequence` the stream sequence or
/// partition offset, `partition` the Kafka partition (-1 where there is none). `duplicate`:
/// the broker already had a message with this id (de-duplication) and stored nothing new;
/// `sequence` is then the original's.
struct ack {
    std::string stream;
    std::uint64_t sequence = 0;
    std::int32_t partition = -1;
    bool duplicate = false;
};

}  // namespace weft::bus
