// Test helpers for the seccomp unit tests: a classic-BPF interpreter that
// runs a compiled program on a seccomp_data record, and the policy's
// program built for each architecture the table is written for.
#pragma once

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "jail/seccomp_policy.h"

namespace corral::seccomp_test {

// A classic-BPF interpreter for seccomp programs: enough to run what
// libseccomp emits, and strict about everything else.
struct Verdict {
  bool ok = false;  // the program ran to a return
  std::uint32_t ret = 0;
};

inline Verdict run_bpf(const std::vector<sock_filter>& prog, const seccomp_data& data) {
  std::uint32_t a = 0;
  std::uint32_t x = 0;
  std::uint32_t mem[BPF_MEMWORDS] = {};
  const auto* bytes = reinterpret_cast<const unsigned char*>(&data);
  for (std::size_t pc = 0; pc < prog.size(); ++pc) {
    const sock_filter& in = prog[pc];
    const std::uint32_t src = BPF_SRC(in.code) == BPF_X ? x : in.k;
    switch (BPF_CLASS(in.code)) {
      case BPF_LD:
        if (in.code == (BPF_LD | BPF_W | BPF_ABS)) {
          if (in.k % 4 != 0 || in.k + 4 > sizeof data) return {};
          std::memcpy(&a, bytes + in.k, 4);
        } else if (in.code == (BPF_LD | BPF_IMM)) {
          a = in.k;
        } else if (in.code == (BPF_LD | BPF_MEM) && in.k < BPF_MEMWORDS) {
          a = mem[in.k];
        } else {
          return {};
        }
        break;
      case BPF_LDX:
        if (in.code == (BPF_LDX | BPF_IMM)) {
          x = in.k;
        } else if (in.code == (BPF_LDX | BPF_MEM) && in.k < BPF_MEMWORDS) {
          x = mem[in.k];
        } else {
          return {};
        }
        break;
      case BPF_ST:
        if (in.k >= BPF_MEMWORDS) return {};
        mem[in.k] = a;
        break;
      case BPF_STX:
        if (in.k >= BPF_MEMWORDS) return {};
        mem[in.k] = x;
        break;
      case BPF_ALU:
        switch (BPF_OP(in.code)) {
          case BPF_ADD:
            a += src;
            break;
          case BPF_SUB:
            a -= src;
            break;
          case BPF_AND:
            a &= src;
            break;
          case BPF_OR:
            a |= src;
            break;
          case BPF_XOR:
            a ^= src;
            break;
          case BPF_LSH:
            a = src < 32 ? a << src : 0;
            break;
          case BPF_RSH:
            a = src < 32 ? a >> src : 0;
            break;
          case BPF_NEG:
            a = 0u - a;
            break;
          default:
            return {};
        }
        break;
      case BPF_JMP: {
        if (BPF_OP(in.code) == BPF_JA) {
          pc += in.k;
          break;
        }
        bool taken = false;
        switch (BPF_OP(in.code)) {
          case BPF_JEQ:
            taken = a == src;
            break;
          case BPF_JGT:
            taken = a > src;
            break;
          case BPF_JGE:
            taken = a >= src;
            break;
          case BPF_JSET:
            taken = (a & src) != 0;
            break;
          default:
            return {};
        }
        pc += taken ? in.jt : in.jf;
        break;
      }
      case BPF_RET:
        if (BPF_RVAL(in.code) == BPF_K) return {true, in.k};
        if (BPF_RVAL(in.code) == BPF_A) return {true, a};
        return {};
      case BPF_MISC:
        if (BPF_MISCOP(in.code) == BPF_TAX) {
          x = a;
        } else {
          a = x;
        }
        break;
      default:
        return {};
    }
  }
  return {};  // fell off the end: the kernel rejects such programs
}

inline constexpr std::uint32_t kAllow = SECCOMP_RET_ALLOW;
inline constexpr std::uint32_t kKill = SECCOMP_RET_KILL_PROCESS;
inline constexpr std::uint32_t ret_errno(int e) {
  return SECCOMP_RET_ERRNO | static_cast<std::uint32_t>(e);
}
inline constexpr std::uint32_t kDefault = ret_errno(kSeccompDefaultErrno);

inline constexpr std::array<SeccompArch, 2> kArches = {kSeccompX86_64, kSeccompAarch64};

// The policy's program for `arch` (compiled once per test process).
inline const std::vector<sock_filter>& program_for(SeccompArch arch) {
  static std::map<SeccompArch, std::vector<sock_filter>> cache;
  auto it = cache.find(arch);
  if (it != cache.end()) return it->second;
  auto compiled = compile_seccomp_rules(seccomp_policy(), arch);
  if (!compiled) {
    ADD_FAILURE() << "compile for " << seccomp_arch_label(arch) << ": "
                  << compiled.error().to_string();
    return cache[arch];
  }
  return cache[arch] = *std::move(compiled);
}

inline std::uint32_t verdict_of(const std::vector<sock_filter>& prog, std::uint32_t audit_arch,
                                int nr, std::array<std::uint64_t, 6> args = {}) {
  seccomp_data data{};
  data.nr = nr;
  data.arch = audit_arch;
  for (int i = 0; i < 6; ++i) data.args[i] = args[static_cast<std::size_t>(i)];
  Verdict v = run_bpf(prog, data);
  EXPECT_TRUE(v.ok) << "the interpreter could not run the program for nr " << nr;
  return v.ret;
}

}  // namespace corral::seccomp_test
