#pragma once
// Inside the metrics endpoint (src/output only): the request side, which
// http_request.cpp parses and http.cpp's connections feed.
#include <cstddef>
#include <string>
#include <string_view>

#include "netlatd/output/http.hpp"

namespace netlatd::http {

// The most a request head may take; a scrape is a request line and a few
// headers, nothing legitimate comes near it.
inline constexpr size_t kMaxRequestHead = 8192;

// The response to the request head received so far, or "" while more is
// needed. Anything but GET or HEAD of /metrics is answered as soon as its
// request line is in, without waiting for the headers.
std::string answer(std::string_view head, const MetricsServer::Render &render);

}  // namespace netlatd::http
