// Runs a callable when the scope ends, unless dismissed. For undo steps
// of a multi-step setup ("if anything after this fails, remove the dir").
#pragma once

#include <utility>

namespace corral {

template <typename F>
class ScopeGuard {
 public:
  explicit ScopeGuard(F f) : f_(std::move(f)) {}
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;
  ~ScopeGuard() {
    if (active_) f_();
  }
  void dismiss() { active_ = false; }

 private:
  F f_;
  bool active_ = true;
};

}  // namespace corral
