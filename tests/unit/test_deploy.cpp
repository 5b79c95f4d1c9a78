// deploy/: the Kubernetes manifest checked against the API's OpenAPI schemas
// (deploy/check/check-manifests.mjs), yamllint on every YAML file there, the
// Dockerfile through a Dockerfile linter, and what netlatd needs from each
// (least privilege, read-only mounts, one metrics port, a config netlatd
// accepts) asserted by path. No cluster and no image build: deploy/README.md.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <yaml-cpp/yaml.h>

#include "netlatd/base/errors.hpp"
#include "netlatd/service/options.hpp"
#include "scratch.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::ContainsSubstring;
using nltest::TempDir;
using Result = nltest::CommandResult;

namespace {

const fs::path kSource = NETLATD_SOURCE_DIR;
const fs::path kDeploy = kSource / "deploy";
const fs::path kManifest = kDeploy / "kubernetes/netlatd.yaml";
const fs::path kCheck = kDeploy / "check";

bool on_path(const std::string &tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

std::string quote(const fs::path &p) { return "'" + p.string() + "'"; }

Result check_manifests(const fs::path &file) {
  return nltest::run_command("node " + quote(kCheck / "check-manifests.mjs") + " " + quote(file));
}

Result lint_dockerfile(const fs::path &file) {
  return nltest::run_command(quote(kCheck / "node_modules/.bin/dockerfile-utils") + " lint " + quote(file));
}

#define SKIP_UNLESS_NODE_CHECKS()                                                                                      \
  do {                                                                                                                 \
    if (!on_path("node"))                                                                                              \
      SKIP("node is not installed (scripts/install-deps.sh)");                                                        \
    if (!fs::exists(kCheck / "node_modules/kubernetes-models") ||                                                      \
        !fs::exists(kCheck / "node_modules/.bin/dockerfile-utils"))                                                    \
      SKIP("deploy/check/node_modules is missing (scripts/install-deps.sh runs npm ci there)");                        \
  } while (0)

void write_file(const fs::path &p, const std::string &text) {
  std::ofstream out(p);
  REQUIRE(out);
  out << text;
}

std::vector<YAML::Node> manifest_documents() { return YAML::LoadAllFromFile(kManifest.string()); }

YAML::Node document(const std::string &kind) {
  for (const YAML::Node &doc : manifest_documents())
    if (doc["kind"] && doc["kind"].as<std::string>() == kind)
      return doc;
  FAIL("no " << kind << " in " << kManifest);
  return {};
}

std::set<std::string> strings(const YAML::Node &seq) {
  std::set<std::string> out;
  for (const YAML::Node &n : seq)
    out.insert(n.as<std::string>());
  return out;
}

}  // namespace

TEST_CASE("deploy: the manifest passes the Kubernetes schema check", "[deploy]") {
  SKIP_UNLESS_NODE_CHECKS();
  const Result r = check_manifests(kManifest);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, ContainsSubstring("valid"));
}

TEST_CASE("deploy: the schema check does report a broken manifest", "[deploy]") {
  // Guards the test above against passing because the tool checked nothing.
  SKIP_UNLESS_NODE_CHECKS();
  TempDir dir;
  std::string text = nltest::read_file(kManifest);
  text = std::regex_replace(text, std::regex("add: \\[BPF, PERFMON\\]"), "add: BPF");
  text += "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: x\nspec:\n  template: {}\n";
  write_file(dir.path() / "broken.yaml", text);
  const Result r = check_manifests(dir.path() / "broken.yaml");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, ContainsSubstring("capabilities/add must be array"));
  CHECK_THAT(r.output, ContainsSubstring("data/spec must have required property selector"));
}

TEST_CASE("deploy: yamllint finds nothing in deploy/'s YAML, and does find a duplicate key", "[deploy]") {
  if (!on_path("yamllint"))
    SKIP("yamllint is not installed (scripts/install-deps.sh)");
  const std::string lint = "yamllint --strict -c " + quote(kCheck / "yamllint.yaml") + " ";
  const Result r = nltest::run_command(lint + quote(kDeploy / "kubernetes") + " " + quote(kDeploy / "collectors"));
  INFO(r.output);
  CHECK(r.status == 0);

  TempDir dir;
  write_file(dir.path() / "dup.yaml", "a: 1\nb: 2\na: 3\n");
  const Result bad = nltest::run_command(lint + quote(dir.path() / "dup.yaml"));
  INFO(bad.output);
  CHECK(bad.status != 0);
  CHECK_THAT(bad.output, ContainsSubstring("duplication of key \"a\""));
}

TEST_CASE("deploy: the Dockerfile passes a Dockerfile linter, which does report a broken one", "[deploy]") {
  SKIP_UNLESS_NODE_CHECKS();
  const Result r = lint_dockerfile(kDeploy / "Dockerfile");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.empty());

  TempDir dir;
  std::string text = nltest::read_file(kDeploy / "Dockerfile");
  text = std::regex_replace(text, std::regex("EXPOSE 9659/tcp"), "EXPOSE metrics");
  write_file(dir.path() / "Dockerfile", text);
  const Result bad = lint_dockerfile(dir.path() / "Dockerfile");
  INFO(bad.output);
  CHECK(bad.status != 0);
  CHECK_THAT(bad.output, ContainsSubstring("EXPOSE metrics"));
}

TEST_CASE("deploy: the Dockerfile builds on Debian 12 and ships only the runtime", "[deploy]") {
  const std::string text = nltest::read_file(kDeploy / "Dockerfile");
  std::vector<std::string> stages;
  const std::regex from(R"(^FROM (\S+)( AS (\S+))?$)", std::regex::multiline);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), from); it != std::sregex_iterator(); ++it)
    stages.push_back((*it)[1]);
  REQUIRE(stages.size() == 2);
  CHECK(stages[0] == "debian:12");
  CHECK(stages[1] == "debian:12-slim");
  const size_t runtime = text.find("FROM debian:12-slim");
  const std::string build_stage = text.substr(0, runtime);
  const std::string runtime_stage =
      std::regex_replace(text.substr(runtime), std::regex("^#.*$", std::regex::multiline), "");
  CHECK_THAT(build_stage, ContainsSubstring("scripts/install-deps.sh --build-only"));
  CHECK_THAT(build_stage, ContainsSubstring("cpack -G DEB"));
  // The runtime stage installs the package (its Depends: the libraries)
  // and no compiler or -dev package.
  CHECK_THAT(runtime_stage, ContainsSubstring("apt-get install -y --no-install-recommends /tmp/netlatd_*.deb"));
  CHECK_FALSE(std::regex_search(runtime_stage, std::regex(R"(-dev\b|clang|build-essential|install-deps)")));
  CHECK_THAT(runtime_stage, ContainsSubstring("ENTRYPOINT [\"/usr/sbin/netlatd\"]"));
  // install-deps.sh still takes the flag the build stage passes.
  CHECK_THAT(nltest::read_file(kSource / "scripts/install-deps.sh"), ContainsSubstring("--build-only)"));
}

TEST_CASE("deploy: the DaemonSet runs with CAP_BPF and CAP_PERFMON only, host mounts read-only", "[deploy]") {
  const YAML::Node ds = document("DaemonSet");
  const YAML::Node pod = ds["spec"]["template"]["spec"];
  CHECK(pod["hostNetwork"].as<bool>());  // the node's NIC, in the node's network namespace
  CHECK_FALSE(pod["hostPID"]);
  CHECK_FALSE(pod["hostIPC"]);
  REQUIRE(pod["containers"].size() == 1);
  const YAML::Node c = pod["containers"][0];
  const YAML::Node sc = c["securityContext"];
  REQUIRE(sc);
  CHECK_FALSE(sc["privileged"].as<bool>());
  CHECK_FALSE(sc["allowPrivilegeEscalation"].as<bool>());
  CHECK(sc["readOnlyRootFilesystem"].as<bool>());
  CHECK(strings(sc["capabilities"]["drop"]) == std::set<std::string>{"ALL"});
  CHECK(strings(sc["capabilities"]["add"]) == std::set<std::string>{"BPF", "PERFMON"});

  // Every host path is mounted read-only, and these are among them.
  std::map<std::string, std::string> host_paths;  // volume name -> host path
  for (const YAML::Node &v : pod["volumes"])
    if (v["hostPath"])
      host_paths[v["name"].as<std::string>()] = v["hostPath"]["path"].as<std::string>();
  std::set<std::string> mounted;
  for (const YAML::Node &m : c["volumeMounts"]) {
    const auto it = host_paths.find(m["name"].as<std::string>());
    if (it == host_paths.end())
      continue;
    INFO("host path " << it->second);
    CHECK(m["readOnly"].as<bool>());
    CHECK(m["mountPath"].as<std::string>() == it->second);
    mounted.insert(it->second);
  }
  CHECK(mounted == std::set<std::string>{"/sys/kernel/btf", "/sys/kernel/tracing", "/sys/fs/cgroup"});
}

TEST_CASE("deploy: one metrics port, scraped by annotation, and a config netlatd accepts", "[deploy]") {
  const YAML::Node ds = document("DaemonSet");
  const YAML::Node tmpl = ds["spec"]["template"];
  const YAML::Node c = tmpl["spec"]["containers"][0];
  const YAML::Node annotations = tmpl["metadata"]["annotations"];
  CHECK(annotations["prometheus.io/scrape"].as<std::string>() == "true");
  CHECK(annotations["prometheus.io/path"].as<std::string>() == "/metrics");
  const std::string port = annotations["prometheus.io/port"].as<std::string>();
  CHECK(c["ports"][0]["containerPort"].as<std::string>() == port);
  std::vector<std::string> args;
  for (const YAML::Node &a : c["args"])
    args.push_back(a.as<std::string>());
  const auto listen = std::find(args.begin(), args.end(), "--metrics-listen");
  REQUIRE(listen + 1 < args.end());
  CHECK(*(listen + 1) == "$(NODE_IP):" + port);
  CHECK_THAT(nltest::read_file(kDeploy / "Dockerfile"), ContainsSubstring("EXPOSE " + port + "/tcp"));

  // The ConfigMap's file, mounted at /etc/netlatd, is read by netlatd's own
  // parser with the DaemonSet's arguments (the node's address stands in).
  const YAML::Node cm = document("ConfigMap");
  TempDir dir;
  const fs::path config = dir.path() / "netlatd.toml";
  write_file(config, cm["data"]["netlatd.toml"].as<std::string>());
  std::vector<std::string> argv{"netlatd"};
  for (std::string a : args)
    argv.push_back(a == "/etc/netlatd/netlatd.toml" ? config.string()
                                                    : std::regex_replace(a, std::regex("\\$\\(NODE_IP\\)"), "10.0.0.1"));
  std::vector<const char *> raw;
  for (const std::string &a : argv)
    raw.push_back(a.c_str());
  netlatd::CommandLine cl;
  try {
    cl = netlatd::parse_command_line(static_cast<int>(raw.size()), raw.data());
  } catch (const netlatd::Error &e) {
    FAIL("netlatd refuses the DaemonSet's configuration: " << e.what());
  }
  CHECK(cl.options.output == "-");  // the container log
  // The container view is on, and it has what it reads: the node's cgroup
  // hierarchy where netlatd looks for it (the pod's own hides the others).
  CHECK(cl.options.by.cgroup);
  bool cgroup_mounted = false;
  for (const YAML::Node &m : c["volumeMounts"])
    cgroup_mounted |= m["mountPath"].as<std::string>() == "/sys/fs/cgroup";
  CHECK(cgroup_mounted == (cl.options.by.cgroup || !cl.options.cgroups.empty()));
  CHECK(cl.options.metrics_listen == "10.0.0.1:" + port);
  CHECK(c["volumeMounts"][0]["mountPath"].as<std::string>() == "/etc/netlatd");
  CHECK(tmpl["spec"]["volumes"][0]["configMap"]["name"].as<std::string>() == cm["metadata"]["name"].as<std::string>());
}
