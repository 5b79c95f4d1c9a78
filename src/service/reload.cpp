// The reload rule: what a SIGHUP cannot change, from the option table.
#include "netlatd/service/reload.hpp"

namespace netlatd {

std::vector<std::string> keep_start_only(const Options &running, Options &next) {
  std::vector<std::string> kept;
  for (const OptionInfo &option : option_table())
    if (option.reload == Reload::NeedsRestart)
      if (auto line = option.keep(running, next))
        kept.push_back(std::move(*line));
  return kept;
}

}  // namespace netlatd
