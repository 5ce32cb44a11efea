#include "store/task_record.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace corral {
namespace {

using T = TaskStatus;
using Json = nlohmann::json;

constexpr TaskTransitionEdge kTaskTransitionTable[] = {
    {T::kQueued, T::kRunning, "a worker took the task: its create stage started"},
    {T::kQueued, T::kCancelled, "cancelled before a sandbox was made for it"},
    {T::kQueued, T::kFailed,
     "it could not start (its inputs were unavailable, or the daemon restarted)"},
    {T::kRunning, T::kSucceeded, "the command exited 0 and every required output was stored"},
    {T::kRunning, T::kFailed, "a stage failed; TaskRecord::reason says which and why"},
    {T::kRunning, T::kTimedOut, "the task's timeout ended the command"},
    {T::kRunning, T::kCancelled, "cancelled while a stage was under way"},
    // Only submit_task takes this edge: a repeat of the same request after
    // a failure with a reason in kRetryableTaskReasons (attempt + 1).
    {T::kFailed, T::kQueued, "resubmitted after a retryable failure: the next attempt"},
    // Only sweep_lost_nodes takes this edge (issue 18): the command never
    // started, so it runs elsewhere as the next attempt.
    {T::kRunning, T::kQueued, "its node was lost before the command started: the next attempt"},
};

// Object keys that print as ".key" in a path; any other key prints as
// ["key"] (JSON-quoted, non-ASCII escaped), so that a path names one field
// unambiguously and stays printable ASCII in an error message.
bool plain_key(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string key_path(const std::string& parent, const std::string& key) {
  if (plain_key(key)) return parent.empty() ? key : parent + "." + key;
  return parent + "[" +
         Json(key).dump(-1, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace) + "]";
}

std::string dump_leaf(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// The path of the first difference below `path`, or nullopt when equal.
// Two values are equal here exactly when their canonical dumps are: 1 and
// 1.0 differ, as they do in the stored canonical form.
std::optional<std::string> first_difference(const Json& a, const Json& b, const std::string& path) {
  if (a.is_object() && b.is_object()) {
    auto ia = a.begin();
    auto ib = b.begin();
    // Both iterate their keys in sorted order: a merge finds the first key
    // that is in one only or holds different values.
    while (ia != a.end() || ib != b.end()) {
      if (ib == b.end() || (ia != a.end() && ia.key() < ib.key())) return key_path(path, ia.key());
      if (ia == a.end() || ib.key() < ia.key()) return key_path(path, ib.key());
      if (auto d = first_difference(ia.value(), ib.value(), key_path(path, ia.key()))) return d;
      ++ia;
      ++ib;
    }
    return std::nullopt;
  }
  if (a.is_array() && b.is_array()) {
    std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
      if (auto d = first_difference(a[i], b[i], path + "[" + std::to_string(i) + "]")) return d;
    }
    if (a.size() != b.size()) return path + "[" + std::to_string(n) + "]";
    return std::nullopt;
  }
  bool containers = a.is_structured() || b.is_structured();
  if (containers || dump_leaf(a) != dump_leaf(b)) return path.empty() ? "(document)" : path;
  return std::nullopt;
}

}  // namespace

std::string_view task_status_name(TaskStatus status) {
  switch (status) {
    case T::kQueued:
      return "queued";
    case T::kRunning:
      return "running";
    case T::kSucceeded:
      return "succeeded";
    case T::kFailed:
      return "failed";
    case T::kTimedOut:
      return "timed_out";
    case T::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::optional<TaskStatus> parse_task_status(std::string_view name) {
  for (TaskStatus s : kAllTaskStatuses) {
    if (task_status_name(s) == name) return s;
  }
  return std::nullopt;
}

bool is_finished(TaskStatus status) { return status != T::kQueued && status != T::kRunning; }

std::string_view task_stage_name(TaskStage stage) {
  switch (stage) {
    case TaskStage::kNone:
      return "none";
    case TaskStage::kCreate:
      return "create";
    case TaskStage::kInitialize:
      return "initialize";
    case TaskStage::kExecute:
      return "execute";
    case TaskStage::kCollect:
      return "collect";
    case TaskStage::kSnapshot:
      return "snapshot";
    case TaskStage::kDestroy:
      return "destroy";
    case TaskStage::kCleanup:
      return "cleanup";
    case TaskStage::kDone:
      return "done";
  }
  return "unknown";
}

std::optional<TaskStage> parse_task_stage(std::string_view name) {
  for (TaskStage s : {TaskStage::kNone, TaskStage::kCreate, TaskStage::kInitialize,
                      TaskStage::kExecute, TaskStage::kCollect, TaskStage::kSnapshot,
                      TaskStage::kDestroy, TaskStage::kCleanup, TaskStage::kDone}) {
    if (task_stage_name(s) == name) return s;
  }
  return std::nullopt;
}

std::span<const TaskTransitionEdge> task_transition_table() { return kTaskTransitionTable; }

bool task_transition_allowed(TaskStatus from, TaskStatus to) {
  for (const TaskTransitionEdge& e : kTaskTransitionTable) {
    if (e.from == from && e.to == to) return true;
  }
  return false;
}

// How deep `text` nests arrays and objects (brackets inside strings do not
// count). Scanned before parsing: the comparison and nlohmann's dump
// recurse once per level.
int nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::string first_differing_field(std::string_view a_json, std::string_view b_json) {
  if (nesting_depth(a_json) > kMaxCompareDepth || nesting_depth(b_json) > kMaxCompareDepth)
    return "(document)";
  Json a = Json::parse(a_json.begin(), a_json.end(), nullptr, /*allow_exceptions=*/false);
  Json b = Json::parse(b_json.begin(), b_json.end(), nullptr, /*allow_exceptions=*/false);
  if (a.is_discarded() || b.is_discarded()) return "(document)";
  return first_difference(a, b, "").value_or("");
}

}  // namespace corral
