#include "weft/http/metrics_handler.hpp"

#include <string>
#include <utility>

#include "weft/http/request.hpp"
#include "weft/http/response.hpp"

namespace weft::http {

auto metrics_handler(metrics::registry reg) -> handler {
    return [reg = std::move(reg)](request& req) -> task<response> {
        const auto f = metrics::negotiate(req.header("Accept").value_or(""));
        co_return response::text(reg.render(f), 200, metrics::content_type(f));
    };
}

}  // namespace weft::http
