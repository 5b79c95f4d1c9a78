// The coverage in the interval line and the text view.
#include "netlatd/output/coverage.hpp"

#include <fmt/format.h>

namespace netlatd {

namespace {

using Json = nlohmann::ordered_json;

inline constexpr uint64_t kJsonShareUnits = 10'000;  // 0.0001: 0.01 %

Json share_json(const Share &s) {
  Json j;
  j["recorded"] = s.recorded;
  if (auto units = s.rounded_down(kJsonShareUnits))
    j["share"] = static_cast<double>(*units) / static_cast<double>(kJsonShareUnits);
  return j;
}

}  // namespace

Json coverage_json(const Coverage &c) {
  Json j;
  j["matching"] = c.overall.matching;
  j.update(share_json(c.overall));
  Json stages = Json::object();
  for (Stage s : kAllStages)
    if (const auto &share = c.stages[static_cast<size_t>(s)])
      stages[std::string(stage_name(s))] = share_json(*share);
  j["stages"] = std::move(stages);
  return j;
}

std::string coverage_text(const Coverage &c) {
  const Share &all = c.overall;
  if (all.matching == 0)
    return all.recorded ? fmt::format("coverage: no packets matched this interval ({} records of packets matched "
                                      "before it)",
                                      all.recorded)
                        : std::string("coverage: no packets matched this interval");
  std::string out = fmt::format("coverage {}{} of {} matching packets (", format_share(all), all.low() ? " LOW" : "",
                                all.matching);
  bool first = true;
  for (Stage s : kAllStages) {
    const auto &share = c.stages[static_cast<size_t>(s)];
    if (!share)
      continue;
    out += fmt::format("{}{} {}{}", first ? "" : ", ", stage_name(s), format_share(*share),
                       share->low() ? " LOW" : "");
    first = false;
  }
  out += ")";
  if (all.low())
    out += fmt::format("  WARNING: under {:.0f} %: the histograms stand for part of the traffic only",
                       kCoverageLowBelow * 100);
  return out;
}

}  // namespace netlatd
