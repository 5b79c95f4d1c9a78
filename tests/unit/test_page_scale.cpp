// netlatd report at the scale issue 34 names: a day of 10 s intervals (8,640
// lines) and 100,000 outlier lines make a page of a few hundred KB, merged
// to 240 columns and 20 waterfalls, and the page says so. Sizes only: no
// verdict here depends on how fast the machine is.
#include <algorithm>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "html.hpp"
#include "model.hpp"

using namespace netlatd::page;
using nlohmann::json;

namespace {

std::string rfc3339(int64_t ms) {
  const time_t s = static_cast<time_t>(ms / 1000);
  tm t{};
  gmtime_r(&s, &t);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &t);
  return std::string(buf) + "." + std::to_string(1000 + ms % 1000).substr(1) + "Z";
}

std::vector<json> golden() {
  std::ifstream in(NETLATD_SOURCE_DIR "/tests/unit/fixtures/page/golden.jsonl");
  std::vector<json> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(json::parse(line, nullptr, false));
  return out;
}

}  // namespace

TEST_CASE("page: a day of intervals and 100k outliers make a small page, merged and saying so", "[page]") {
  const std::vector<json> g = golden();
  json interval = g[2], outlier = g[1];  // 6 packets, 2 series; the docs' slow packet
  interval.erase("future_field");
  const int64_t t0 = 1795341600000;
  Builder b;
  int64_t slowest = 0;
  for (int64_t i = 0; i < 8640; ++i) {
    interval["start"] = rfc3339(t0 + i * 10000);
    interval["time"] = rfc3339(t0 + (i + 1) * 10000);
    b.add_line(interval.dump(), "day.jsonl");
    for (int64_t k = 0; k < (i < 4960 ? 12 : 11); ++k) {  // 100,000 in all
      outlier["time"] = rfc3339(t0 + i * 10000 + k * 800);
      const int64_t total = 1000000 + (i * 131 + k * 7919) % 1000003;
      slowest = std::max(slowest, total);
      outlier["total_ns"] = total;
      b.add_line(outlier.dump(), "day.jsonl");
    }
  }
  CHECK(b.lines() == 8640 + 100000);
  CHECK(b.skipped() == 0);
  const json m = b.model();
  CHECK(m["input"]["outliers"] == 100000);
  CHECK(m["columns"].size() == kMaxColumns);
  CHECK(m["columns"][0] == json::array({t0, t0 + 360000, 36}));
  CHECK(m["waterfalls"].size() == kWaterfalls);
  CHECK(m["waterfalls"][0]["total_ns"] == slowest);
  for (size_t i = 1; i < m["waterfalls"].size(); ++i)
    CHECK(m["waterfalls"][i - 1]["total_ns"] >= m["waterfalls"][i]["total_ns"]);
  const std::string page = render_page(m);
  INFO("page of " << page.size() << " bytes");
  CHECK(page.size() < 2'000'000);
}
