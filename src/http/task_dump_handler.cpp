#include "weft/http/task_dump_handler.hpp"

#include "weft/http/request.hpp"
#include "weft/http/response.hpp"

namespace weft::http {

auto task_dump_handler(runtime& rt) -> handler {
    return [&rt](request& /*req*/) -> task<response> {
        co_return response::text(rt.dump().to_string(), 200, "text/plain; charset=utf-8");
    };
}

}  // namespace weft::http
