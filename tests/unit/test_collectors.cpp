// deploy/collectors/: the Vector, Fluent Bit and OpenTelemetry Collector
// snippets, each read with a real parser of its format (toml++ for Vector's
// TOML, yaml-cpp for the two YAML files) and held against what netlatd
// writes: the file they follow is the packaged config's `output`, they decode
// JSON, and every field they name, and the time format they read `time`
// with, fit real lines made by netlatd's own formatter.
#include <fnmatch.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>
#include <yaml-cpp/yaml.h>

#include "netlatd/model/interval.hpp"
#include "netlatd/output/format.hpp"
#include "scratch.hpp"

using namespace netlatd;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = NETLATD_SOURCE_DIR;
const fs::path kCollectors = kSource / "deploy/collectors";

// An interval line and an outlier line as the daemon writes them.
struct Lines {
  json interval, outlier;
};

Lines real_lines() {
  netlatd_packet p{};
  const uint64_t base = 50'000'000'000;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_RAISE] = base;
  p.stamp_ns[NETLATD_STAMP_SOFTIRQ_ENTRY] = base + 1'000;
  p.stamp_ns[NETLATD_STAMP_RECEIVE_SKB] = base + 3'000;
  p.stamp_ns[NETLATD_STAMP_SOCK_QUEUE] = base + 6'000;
  p.stamp_ns[NETLATD_STAMP_SWITCH_IN] = base + 20'000;
  p.stamp_ns[NETLATD_STAMP_RECV_RETURN] = base + 23'000;
  p.l4proto = 17;
  p.dport = 5000;
  p.len = 64;
  IntervalAggregator agg;
  agg.add(p);

  ReportHeader h;
  h.host = "web-1";
  h.iface = "lo";
  h.ifindex = 1;
  h.ports = {5000};
  h.kernel = "6.18.0";
  h.version = "0.1.0";
  IntervalReport r;
  r.end = std::chrono::system_clock::now();
  r.start = r.end - std::chrono::seconds(10);
  r.data = &agg;
  const int64_t wall_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(r.end.time_since_epoch()).count();
  return {json::parse(format_json_line(h, r)),
          json::parse(format_outlier_json_line(h, p, wall_ns - static_cast<int64_t>(base)))};
}

// Where netlatd writes as packaged (configs/netlatd.toml's `output`).
std::string packaged_output() {
  const toml::table config = toml::parse_file((kSource / "configs/netlatd.toml").string());
  const auto output = config["output"].value<std::string>();
  REQUIRE(output);
  return *output;
}

// The glob a collector follows takes netlatd's file, and not the copies
// logrotate leaves (netlatd.jsonl.1, .2.gz), which would be read twice.
void check_follows_output(const std::string &glob) {
  INFO("glob " << glob);
  const std::string out = packaged_output();
  CHECK(fnmatch(glob.c_str(), out.c_str(), FNM_PATHNAME) == 0);
  CHECK(fnmatch(glob.c_str(), (out + ".1").c_str(), FNM_PATHNAME) != 0);
  CHECK(fnmatch(glob.c_str(), (out + ".2.gz").c_str(), FNM_PATHNAME) != 0);
}

// A JSON pointer for a dotted field path: "stages.total.p99_ns".
json::json_pointer pointer(const std::string &dotted) {
  return json::json_pointer("/" + std::regex_replace(dotted, std::regex("\\."), "/"));
}

void check_field(const json &line, const std::string &dotted) {
  INFO("field '" << dotted << "' in " << line.dump().substr(0, 200));
  CHECK(line.contains(pointer(dotted)));
}

// A strptime/strftime format as a regex of what it accepts, for the
// directives these snippets use; an unknown directive fails the test.
std::string format_regex(const std::string &format) {
  std::string re = "^";
  for (size_t i = 0; i < format.size(); i++) {
    if (format[i] != '%') {
      if (!std::isalnum(static_cast<unsigned char>(format[i])))
        re += '\\';
      re += format[i];
      continue;
    }
    const std::string rest = format.substr(i + 1);
    if (rest.rfind(".3f", 0) == 0) {  // chrono (Vector): the dot and 3 digits
      re += "\\.[0-9]{3}";
      i += 3;
      continue;
    }
    switch (format[++i]) {
    case 'Y': re += "[0-9]{4}"; break;
    case 'm': case 'd': case 'H': case 'M': case 'S': re += "[0-9]{2}"; break;
    case 'L': re += "[0-9]{3}"; break;  // milliseconds (Fluent Bit, stanza's strptime)
    default: FAIL("format directive %" << format[i] << " in '" << format << "' is not known to this test");
    }
  }
  return re + "$";
}

// Both kinds of line carry `field` as a time the format reads.
void check_time_format(const Lines &lines, const std::string &field, const std::string &format) {
  INFO("time field '" << field << "', format '" << format << "'");
  const std::regex re(format_regex(format));
  for (const json *line : {&lines.interval, &lines.outlier}) {
    REQUIRE(line->contains(pointer(field)));
    const std::string value = line->at(pointer(field)).get<std::string>();
    INFO("value " << value);
    CHECK(std::regex_match(value, re));
  }
}

// Dotted paths after `prefix` in an expression: ".type", "attributes.time".
std::set<std::string> paths_in(const std::string &text, const std::string &prefix) {
  std::set<std::string> out;
  const std::regex re("(^|[^A-Za-z0-9_!\"])" + prefix + "([a-z_][a-z0-9_]*(\\.[a-z_][a-z0-9_]*)*)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.insert((*it)[2]);
  return out;
}

std::string yaml_string(const YAML::Node &node, const std::string &key) {
  INFO("key " << key);
  REQUIRE(node[key]);
  return node[key].as<std::string>();
}

}  // namespace

TEST_CASE("collectors: Vector's TOML follows netlatd's file and decodes its lines", "[collectors]") {
  const Lines lines = real_lines();
  const toml::table vector = toml::parse_file((kCollectors / "vector.toml").string());

  const toml::table *source = vector["sources"]["netlatd"].as_table();
  REQUIRE(source);
  CHECK((*source)["type"].value<std::string>() == "file");
  const toml::array *include = (*source)["include"].as_array();
  REQUIRE(include);
  REQUIRE(include->size() == 1);
  check_follows_output(*include->get(0)->value<std::string>());

  const toml::table *parsed = vector["transforms"]["netlatd_parsed"].as_table();
  REQUIRE(parsed);
  CHECK((*parsed)["type"].value<std::string>() == "remap");
  CHECK((*parsed)["inputs"][0].value<std::string>() == "netlatd");
  const std::string vrl = *(*parsed)["source"].value<std::string>();
  INFO(vrl);
  // The file source puts each line in .message; the whole event becomes the line's object.
  CHECK(std::regex_search(vrl, std::regex(R"(\.\s*=\s*parse_json!\(string!\(\.message\)\))")));
  std::smatch ts;
  REQUIRE(std::regex_search(vrl, ts, std::regex(R"re(parse_timestamp!\(\.([a-z_]+),\s*format:\s*"([^"]+)"\))re")));
  check_time_format(lines, ts[1], ts[2]);

  const toml::table *intervals = vector["transforms"]["netlatd_intervals"].as_table();
  REQUIRE(intervals);
  CHECK((*intervals)["inputs"][0].value<std::string>() == "netlatd_parsed");
  const std::string condition = *(*intervals)["condition"].value<std::string>();
  std::smatch eq;
  REQUIRE(std::regex_match(condition, eq, std::regex(R"re(\.([a-z_]+) == "([a-z]+)")re")));
  CHECK(lines.interval.at(std::string(eq[1])) == std::string(eq[2]));
  CHECK(lines.outlier.at(std::string(eq[1])) != std::string(eq[2]));

  // Every field the VRL and the condition name is in an interval line;
  // .message and .timestamp are Vector's own.
  for (const std::string &path : paths_in(vrl + "\n" + condition, "\\."))
    if (path != "message" && path != "timestamp")
      check_field(lines.interval, path);
  CHECK(vector["sinks"]["netlatd_console"]["inputs"][0].value<std::string>() == "netlatd_intervals");
}

TEST_CASE("collectors: Fluent Bit's YAML follows netlatd's file and decodes its lines", "[collectors]") {
  const Lines lines = real_lines();
  const YAML::Node fluent = YAML::LoadFile((kCollectors / "fluent-bit.yaml").string());

  const YAML::Node inputs = fluent["pipeline"]["inputs"];
  REQUIRE(inputs.IsSequence());
  REQUIRE(inputs.size() == 1);
  const YAML::Node tail = inputs[0];
  CHECK(yaml_string(tail, "name") == "tail");
  check_follows_output(yaml_string(tail, "path"));
  const std::string tag = yaml_string(tail, "tag");

  // The input's parser is defined here, decodes JSON and takes `time` as the record's time.
  const std::string parser_name = yaml_string(tail, "parser");
  YAML::Node parser;
  for (const YAML::Node &p : fluent["parsers"])
    if (p["name"] && p["name"].as<std::string>() == parser_name)
      parser = p;
  REQUIRE(parser);
  CHECK(yaml_string(parser, "format") == "json");
  check_time_format(lines, yaml_string(parser, "time_key"), yaml_string(parser, "time_format"));

  // grep's `regex` is "FIELD REGEX".
  const YAML::Node filters = fluent["pipeline"]["filters"];
  REQUIRE(filters.size() == 1);
  CHECK(yaml_string(filters[0], "name") == "grep");
  CHECK(yaml_string(filters[0], "match") == tag);
  std::smatch grep;
  const std::string rule = yaml_string(filters[0], "regex");
  REQUIRE(std::regex_match(rule, grep, std::regex(R"(([a-z_]+) (.+))")));
  const std::regex keep{grep[2].str()};
  check_field(lines.interval, grep[1]);
  CHECK(std::regex_search(lines.interval.at(std::string(grep[1])).get<std::string>(), keep));
  CHECK_FALSE(std::regex_search(lines.outlier.at(std::string(grep[1])).get<std::string>(), keep));

  for (const YAML::Node &output : fluent["pipeline"]["outputs"])
    CHECK(yaml_string(output, "match") == tag);
}

TEST_CASE("collectors: the OpenTelemetry Collector's YAML follows netlatd's file and decodes its lines",
          "[collectors]") {
  const Lines lines = real_lines();
  const YAML::Node otel = YAML::LoadFile((kCollectors / "otelcol.yaml").string());

  const YAML::Node receiver = otel["receivers"]["filelog/netlatd"];
  REQUIRE(receiver);
  REQUIRE(receiver["include"].size() == 1);
  check_follows_output(receiver["include"][0].as<std::string>());

  const YAML::Node operators = receiver["operators"];
  REQUIRE(operators.size() == 2);
  const YAML::Node parser = operators[0];
  CHECK(yaml_string(parser, "type") == "json_parser");
  CHECK(yaml_string(parser, "parse_from") == "body");
  CHECK(yaml_string(parser, "parse_to") == "attributes");
  const YAML::Node ts = parser["timestamp"];
  REQUIRE(ts);
  CHECK(yaml_string(ts, "layout_type") == "strptime");
  const std::string from = yaml_string(ts, "parse_from");
  REQUIRE(from.rfind("attributes.", 0) == 0);
  check_time_format(lines, from.substr(11), yaml_string(ts, "layout"));

  // The filter operator drops what its expression matches.
  const YAML::Node filter = operators[1];
  CHECK(yaml_string(filter, "type") == "filter");
  const std::string expr = yaml_string(filter, "expr");
  std::smatch ne;
  REQUIRE(std::regex_match(expr, ne, std::regex(R"re(attributes\.([a-z_]+) != "([a-z]+)")re")));
  CHECK(lines.interval.at(std::string(ne[1])) == std::string(ne[2]));
  CHECK(lines.outlier.at(std::string(ne[1])) != std::string(ne[2]));
  for (const std::string &path : paths_in(expr, "attributes\\."))
    check_field(lines.interval, path);

  const YAML::Node pipeline = otel["service"]["pipelines"]["logs/netlatd"];
  REQUIRE(pipeline);
  CHECK(pipeline["receivers"][0].as<std::string>() == "filelog/netlatd");
  for (const YAML::Node &exporter : pipeline["exporters"])
    CHECK(otel["exporters"][exporter.as<std::string>()]);
}

TEST_CASE("collectors: the checks above do catch a snippet that does not fit", "[collectors]") {
  // Guards the tests above against passing because they checked nothing.
  const Lines lines = real_lines();
  CHECK(format_regex("%Y-%m-%dT%H:%M:%S.%LZ") == R"(^[0-9]{4}\-[0-9]{2}\-[0-9]{2}T[0-9]{2}\:[0-9]{2}\:[0-9]{2}\.[0-9]{3}Z$)");
  const std::string time = lines.interval.at("time").get<std::string>();
  CHECK(std::regex_match(time, std::regex(format_regex("%Y-%m-%dT%H:%M:%S%.3fZ"))));
  CHECK_FALSE(std::regex_match(time, std::regex(format_regex("%Y-%m-%dT%H:%M:%SZ"))));
  CHECK_FALSE(std::regex_match(time, std::regex(format_regex("%Y-%m-%d %H:%M:%S.%L"))));
  CHECK(paths_in(R"(. = parse_json!(string!(.message)); .x = .stages.total.p99_ns)", "\\.") ==
        std::set<std::string>{"message", "x", "stages.total.p99_ns"});
  CHECK_FALSE(lines.interval.contains(pointer("stages.total.p99")));
  CHECK(lines.interval.contains(pointer("stages.total.p99_ns")));
  const std::string out = packaged_output();
  CHECK(fnmatch("/var/log/netlatd/*.json", out.c_str(), FNM_PATHNAME) != 0);
}
