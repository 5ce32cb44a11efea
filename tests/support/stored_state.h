// What a daemon stored, read straight from its state database while it is
// down (the crash and restart tests compare it with what the API says).
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "store/state_store.h"

namespace corral::testing {

// The row the daemon of `data_dir` stored for process `pid` of `sandbox`.
inline std::optional<ProcessRecord> stored_process(const std::string& data_dir,
                                                   const std::string& sandbox,
                                                   const std::string& pid) {
  auto store = StateStore::open(data_dir + "/state.db");
  if (!store) {
    ADD_FAILURE() << store.error().message;
    return std::nullopt;
  }
  auto procs = store->list_processes(sandbox);
  if (!procs) return std::nullopt;
  for (auto& p : *procs) {
    if (p.id == pid) return p;
  }
  return std::nullopt;
}

}  // namespace corral::testing
