#pragma once

// weft::http: the HTTP/1.1 server, its router and request parser, and a small client.

#include "weft/http/body_decoder.hpp"
#include "weft/http/client.hpp"
#include "weft/http/client_pool.hpp"
#include "weft/http/metrics_handler.hpp"
#include "weft/http/parse_error.hpp"
#include "weft/http/request.hpp"
#include "weft/http/request_head.hpp"
#include "weft/http/request_limits.hpp"
#include "weft/http/request_parser.hpp"
#include "weft/http/response.hpp"
#include "weft/http/router.hpp"
#include "weft/http/server.hpp"
#include "weft/http/task_dump_handler.hpp"
#include "weft/http/websocket.hpp"
