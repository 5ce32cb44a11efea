// The `corral` binary maps no shared library but libc's own (libc, libm and
// the loader) when it is built with CORRAL_STATIC: every `corral run` execs
// it, and binding libstdc++ and the others at each start costs about a
// millisecond and ~100 KiB of dirty memory per sandbox (docs/performance.md).
// An explicit `stdc++` in a link list once made it dynamic again unnoticed.
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace corral::testing {
namespace {

template <typename T>
bool read_at(int fd, off_t offset, T& out) {
  return pread(fd, &out, sizeof out, offset) == static_cast<ssize_t>(sizeof out);
}

// The DT_NEEDED names of a 64-bit ELF file, or an error text.
[[maybe_unused]] std::vector<std::string> needed_libraries(const std::string& path,
                                                          std::string& error) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return error = "cannot open " + path, std::vector<std::string>{};
  Elf64_Ehdr eh;
  if (!read_at(fd.get(), 0, eh) || eh.e_ident[EI_CLASS] != ELFCLASS64)
    return error = path + " is not a 64-bit ELF file", std::vector<std::string>{};
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  for (int i = 0; i < eh.e_phnum; ++i) {
    if (!read_at(fd.get(), static_cast<off_t>(eh.e_phoff + i * sizeof(Elf64_Phdr)), ph[i]))
      return error = "short program header", std::vector<std::string>{};
  }
  // Virtual address -> file offset, through the PT_LOAD segments.
  auto file_offset = [&](Elf64_Addr vaddr) -> off_t {
    for (const auto& p : ph) {
      if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && vaddr < p.p_vaddr + p.p_filesz)
        return static_cast<off_t>(p.p_offset + (vaddr - p.p_vaddr));
    }
    return -1;
  };
  std::vector<Elf64_Dyn> dyn;
  for (const auto& p : ph) {
    if (p.p_type != PT_DYNAMIC) continue;
    for (std::size_t i = 0; i < p.p_filesz / sizeof(Elf64_Dyn); ++i) {
      Elf64_Dyn d;
      if (!read_at(fd.get(), static_cast<off_t>(p.p_offset + i * sizeof d), d) || d.d_tag == DT_NULL)
        break;
      dyn.push_back(d);
    }
  }
  Elf64_Addr strtab = 0;
  for (const auto& d : dyn) {
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
  }
  std::vector<std::string> out;
  const off_t strings = file_offset(strtab);
  for (const auto& d : dyn) {
    if (d.d_tag != DT_NEEDED) continue;
    if (strings < 0) return error = "no string table", std::vector<std::string>{};
    std::string name;
    char c;
    for (off_t at = strings + static_cast<off_t>(d.d_un.d_val);
         pread(fd.get(), &c, 1, at) == 1 && c != '\0' && name.size() < 256; ++at)
      name.push_back(c);
    out.push_back(name);
  }
  return out;
}

TEST(StaticLink, CorralNeedsOnlyLibcItsMathAndTheLoader) {
#ifndef CORRAL_TEST_LINK_STATIC
  GTEST_SKIP() << "this build links corral dynamically (a sanitizer build, or CORRAL_STATIC off "
                  "or a static archive missing: see CMakeLists.txt)";
#else
  std::string error;
  const auto needed = needed_libraries(CORRAL_TEST_BIN, error);
  ASSERT_TRUE(error.empty()) << error;
  const std::set<std::string> allowed = {"libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2"};
  for (const auto& lib : needed) {
    EXPECT_TRUE(allowed.count(lib) == 1)
        << CORRAL_TEST_BIN << " needs " << lib
        << " at run time; link it statically (see CORRAL_LINK_STATIC in CMakeLists.txt)";
  }
  EXPECT_FALSE(needed.empty()) << "no DT_NEEDED at all: not the binary this test expects";
#endif
}

}  // namespace
}  // namespace corral::testing
