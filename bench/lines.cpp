// Where each source line of loaded BPF programs sits in their JIT image, for
// bench/: bench.py maps `perf record` samples taken inside netlatd's
// programs to the lines of bpf/ that they fell on ("lines" part).
//
//   nlbench-lines PROG_ID [PROG_ID ...]
//
// For each program, one line per line-info record it was loaded with:
//   ADDRESS<TAB>PROGRAM<TAB>FILE:LINE<TAB>SOURCE
// ADDRESS (hex) is where the record's first instruction starts in the JIT
// image; a sample at an address belongs to the record with the greatest
// ADDRESS at or below it. FILE is the base name. A program without line info
// (not loaded with BTF) prints nothing. Needs root (program info by id).
// Errors: one line, exit 1; bad arguments: usage, exit 64.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "nlbench.hpp"

namespace {

constexpr const char* kUsage = "usage: nlbench-lines PROG_ID [PROG_ID ...]\n";

struct BtfDeleter {
  void operator()(btf* b) const { btf__free(b); }
};

// Line info of one program, as the kernel kept it.
void print_lines(uint32_t id) {
  const int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) nlbench::die(("program " + std::to_string(id)).c_str());
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (bpf_prog_get_info_by_fd(fd, &info, &len) != 0) nlbench::die("BPF_OBJ_GET_INFO_BY_FD");
  const uint32_t n = std::min(info.nr_line_info, info.nr_jited_line_info);
  const uint32_t rec_size = info.line_info_rec_size;
  const uint32_t btf_id = info.btf_id;
  char name[sizeof info.name + 1] = {};
  std::memcpy(name, info.name, sizeof info.name);
  if (n == 0 || btf_id == 0 || rec_size < sizeof(bpf_line_info)) {
    close(fd);
    return;
  }
  std::vector<char> lines(static_cast<size_t>(info.nr_line_info) * rec_size);
  std::vector<uint64_t> addrs(info.nr_jited_line_info);
  bpf_prog_info more{};
  more.nr_line_info = info.nr_line_info;
  more.line_info_rec_size = rec_size;
  more.line_info = reinterpret_cast<uintptr_t>(lines.data());
  more.nr_jited_line_info = info.nr_jited_line_info;
  more.jited_line_info_rec_size = sizeof(uint64_t);
  more.jited_line_info = reinterpret_cast<uintptr_t>(addrs.data());
  len = sizeof more;
  if (bpf_prog_get_info_by_fd(fd, &more, &len) != 0) nlbench::die("BPF_OBJ_GET_INFO_BY_FD (lines)");
  close(fd);
  std::unique_ptr<btf, BtfDeleter> strings(btf__load_from_kernel_by_id(btf_id));
  if (!strings) nlbench::die("program BTF");
  for (uint32_t i = 0; i < n; i++) {
    const auto* l = reinterpret_cast<const bpf_line_info*>(lines.data() + static_cast<size_t>(i) * rec_size);
    const char* file = btf__name_by_offset(strings.get(), l->file_name_off);
    const char* src = btf__name_by_offset(strings.get(), l->line_off);
    std::string_view base = file ? file : "?";
    if (const auto slash = base.rfind('/'); slash != std::string_view::npos) base.remove_prefix(slash + 1);
    std::string text = src ? src : "";
    for (char& c : text)
      if (c == '\t' || c == '\n') c = ' ';
    std::printf("%llx\t%s\t%.*s:%u\t%s\n", static_cast<unsigned long long>(addrs[i]), name,
                static_cast<int>(base.size()), base.data(), BPF_LINE_INFO_LINE_NUM(l->line_col), text.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  nlbench::tool_name = "nlbench-lines";
  if (argc < 2) nlbench::usage(kUsage);
  std::vector<uint32_t> ids;
  for (int i = 1; i < argc; i++) {
    const auto id = nlbench::parse_number<uint32_t>(argv[i], 1, UINT32_MAX);
    if (!id) nlbench::usage(kUsage);
    ids.push_back(*id);
  }
  for (uint32_t id : ids) print_lines(id);
  return 0;
}
