#include "soak_probes.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "net_fixture.hpp"
#include "scratch.hpp"

using nlohmann::json;
namespace fs = std::filesystem;

namespace nltest::soak_tier {

std::map<std::string, uint64_t> udp_snmp(const std::string &ns) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(sh_output("ip netns exec " + ns + " cat /proc/net/snmp"));
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Udp: ", 0) != 0)
      continue;
    std::istringstream f(line.substr(5));
    std::vector<std::string> words;
    for (std::string w; f >> w;)
      words.push_back(w);
    if (names.empty()) {
      names = words;
      continue;
    }
    for (size_t i = 0; i < names.size() && i < words.size(); i++)
      out[names[i]] = std::stoull(words[i]);
    break;
  }
  return out;
}

std::set<uint32_t> programs_held_by(pid_t pid) {
  std::set<uint32_t> ids;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fdinfo", ec)) {
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);)
      if (line.rfind("prog_id:", 0) == 0)
        ids.insert(static_cast<uint32_t>(std::stoul(line.substr(8))));
  }
  return ids;
}

std::set<uint32_t> loaded_program_ids() {
  std::set<uint32_t> ids;
  const std::string text = sh_output("bpftool -j prog show 2>/dev/null");
  if (!text.empty())
    for (const json &p : json::parse(text))
      ids.insert(p["id"].get<uint32_t>());
  return ids;
}

uint64_t status_kib(const std::string &status, const std::string &key) {
  const size_t at = status.find(key + ":");
  return at == std::string::npos ? 0 : std::strtoull(status.c_str() + at + key.size() + 1, nullptr, 10);
}

double cpu_seconds(pid_t pid) {
  std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  const size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos)
    return 0;
  std::istringstream in(stat.substr(close_paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; in >> field; i++) {
    if (i == 14)
      utime = std::stoull(field);
    if (i == 15) {
      stime = std::stoull(field);
      break;
    }
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace nltest::soak_tier
