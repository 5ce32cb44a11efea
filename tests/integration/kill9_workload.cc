// The kill -9 loop's workload (kill9_loop.h): what each client does until
// the daemon is killed, and what it puts in the ledger. Only a 2xx answer
// read whole is an acknowledgement; a request that got no answer (the
// daemon died under it) is in doubt and settled after the restart.
#include <netinet/in.h>

#include <algorithm>
#include <thread>

#include "base/sha256.h"
#include "integration/kill9_loop.h"

namespace corral::testing::kill9 {

using nlohmann::json;
namespace F = finding;

std::string tail_of(const std::string& text, std::size_t n) {
  return text.size() > n ? "..." + text.substr(text.size() - n) : text;
}

std::string brief(const HttpReply& r) {
  return std::to_string(r.status) + " " + tail_of(r.body, 400);
}

// What the host still holds of sandbox `id` (its cgroups, mounts naming

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// ---------------------------------------------------------------------------
// The workload.

void Kill9Loop::work(int w, const std::atomic<bool>& stop) {
  std::mt19937 rng(seed_ * 31 + static_cast<unsigned>(cycle_ * kWorkers + w));
  while (!stop) {
    std::vector<std::string> mine;
    {
      std::lock_guard lock(ledger_.mu);
      mine = ledger_.owned[w];
    }
    const unsigned dice = rng() % 100;
    if (mine.empty() || (mine.size() < kPerWorker && dice < 15)) {
      create(w, rng);
      continue;
    }
    const std::string id = mine[rng() % mine.size()];
    if (dice < 15)
      destroy(w, id);  // full: make room
    else if (dice < 28)
      exec(w, id);
    else if (dice < 42)
      start_process(w, id, rng);
    else if (dice < 52)
      wait_process(w, id, rng);
    else if (dice < 68)
      upload(w, id, rng);
    else if (dice < 80)
      download(w, id, rng);
    else if (dice < 85)
      remove_file(w, id, rng);
    else if (dice < 92)
      replay_create(w, id);
    else
      destroy(w, id);
  }
}

void Kill9Loop::create(int w, std::mt19937& rng) {
  const int n = next_n_++;
  const std::string tag = "k9-w" + std::to_string(w) + "-n" + std::to_string(n);
  const bool network = world_ != nullptr && rng() % 4 == 0;
  const bool keyed = rng() % 5 != 0;
  json body{{"hostname", tag}, {"limits", {{"memory", "64Mi"}, {"disk", "16Mi"}}}};
  if (network) body["network"] = {{"mode", "allowlist"}, {"allow", {"allowed.test"}}};
  CreateFact f;
  f.key = keyed ? "key-" + tag : "";
  f.body = body.dump();
  f.worker = w;
  f.tcp = tcp_of(w);
  {
    std::lock_guard lock(ledger_.mu);
    ledger_.creates[tag] = f;
  }
  // Some keyed creates are sent twice at the same moment, once on each
  // listener: the daemon must make one sandbox of them.
  const bool twice = keyed && rng() % 4 == 0;
  HttpReply twin;
  std::thread twin_thread;
  if (twice) twin_thread = std::thread([&] { twin = send_create(f, !f.tcp); });
  HttpReply r = send_create(f, f.tcp);
  if (twice) twin_thread.join();
  note_create_answer(tag, r, network, w);
  if (twice) note_create_answer(tag, twin, network, w);
}

HttpReply Kill9Loop::send_create(const CreateFact& f, bool tcp) {
  http::Headers headers;
  if (!f.key.empty()) headers.push_back({"idempotency-key", f.key});
  return d_.request("POST", "/v1/sandboxes", f.body, tcp, true, headers);
}

void Kill9Loop::note_create_answer(const std::string& tag, const HttpReply& r, bool network,
                                   int w) {
  const json j = r.json();
  const std::string id = j.value("id", "");
  std::lock_guard lock(ledger_.mu);
  CreateFact& f = ledger_.creates[tag];
  if (r.status == 0) {
    f.unanswered = true;
    return;
  }
  if ((r.status != 200 && r.status != 201) || id.empty()) {
    findings_.add(F::kAnswer,
                  "cycle " + std::to_string(cycle_) + ": create " + tag + " -> " + brief(r));
    return;
  }
  f.answered_ids.insert(id);
  if (f.answered_ids.size() > 1) {
    findings_.add(F::kDuplicate, "cycle " + std::to_string(cycle_) + ": key " + f.key +
                                     " answered " + ::testing::PrintToString(f.answered_ids));
  }
  if (ledger_.sandboxes.count(id) != 0) return;
  const std::string state = j.value("state", "");
  if (state != "ready" && state != "running") return;  // a replay of a dead one
  SandboxFact s;
  s.tag = tag;
  s.worker = w;
  s.network = network;
  if (network) {
    s.link = interface_with(j["network"].is_object() ? j["network"].value("host_address", "")
                                                     : std::string());
    if (s.link.empty())
      findings_.add(F::kAnswer, "cycle " + std::to_string(cycle_) + ": network sandbox " + id +
                                    " has no host link: " + r.body);
  }
  ledger_.sandboxes[id] = s;
  ledger_.owned[w].push_back(id);
  ++acked_;
}

void Kill9Loop::exec(int w, const std::string& id) {
  const std::string word = "e" + std::to_string(next_n_++);
  HttpReply r =
      call(w, "POST", "/v1/sandboxes/" + id + "/exec", json{{"cmd", "echo " + word}}.dump());
  if (r.status == 0) return;
  if (r.status != 200 || r.json().value("stdout", "") != word + "\n")
    return unexpected(w, "exec in " + id, r);
  ++acked_;
}

void Kill9Loop::start_process(int w, const std::string& id, std::mt19937& rng) {
  {
    std::lock_guard lock(ledger_.mu);
    if (ledger_.sandboxes[id].procs.size() >= 6) return exec(w, id);
  }
  const int n = next_n_++;
  ProcFact p;
  p.token = "p" + std::to_string(n);
  p.exit_code = 1 + n % 60;
  static const char* const kSleeps[] = {"0", "0.3", "3"};
  const std::string cmd =
      "echo " + p.token + "; sleep " + kSleeps[rng() % 3] + "; exit " + std::to_string(p.exit_code);
  HttpReply r = call(w, "POST", "/v1/sandboxes/" + id + "/processes", json{{"cmd", cmd}}.dump());
  if (r.status == 0) return;
  const std::string pid = r.json().value("id", "");
  if (r.status != 201 || pid.empty()) return unexpected(w, "process start in " + id, r);
  std::lock_guard lock(ledger_.mu);
  ledger_.sandboxes[id].procs[pid] = p;
  ++acked_;
}

void Kill9Loop::wait_process(int w, const std::string& id, std::mt19937& rng) {
  std::string pid;
  int expected = 0;
  {
    std::lock_guard lock(ledger_.mu);
    auto& procs = ledger_.sandboxes[id].procs;
    if (procs.empty()) return;
    auto it = std::next(procs.begin(), static_cast<long>(rng() % procs.size()));
    pid = it->first;
    expected = it->second.exit_code;
  }
  HttpReply r = call(w, "POST", "/v1/sandboxes/" + id + "/processes/" + pid + "/wait?timeout=0.2");
  if (r.status == 0 || r.status == 408) return;
  if (r.status == 404) {
    findings_.add(F::kProcForgotten, at(id) + ": wait for " + pid + " -> " + brief(r));
    std::lock_guard lock(ledger_.mu);
    ledger_.sandboxes[id].procs.erase(pid);  // reported once
    return;
  }
  const json j = r.json();
  if (r.status != 200 || j.value("state", "") != "exited")
    return unexpected(w, "wait for " + pid + " in " + id, r);
  // A process that a restart lost has no exit code: nothing was promised.
  if (j["exit_code"].is_null()) return;
  if (j.value("exit_code", -1) != expected) return unexpected(w, "wait for " + pid, r);
  std::lock_guard lock(ledger_.mu);
  ledger_.sandboxes[id].procs[pid].seen_exit = expected;
  ++acked_;
}

void Kill9Loop::upload(int w, const std::string& id, std::mt19937& rng) {
  const std::string path = "/workspace/f" + std::to_string(next_n_++) + ".bin";
  const std::string data = random_bytes(rng, 1 + rng() % 32768);
  const std::string sha = sha256_hex(data);
  HttpReply r = call(w, "PUT", "/v1/sandboxes/" + id + "/files?path=" + path, data,
                     {{"content-type", "application/octet-stream"}});
  if (r.status == 0) return;
  const json j = r.json();
  if (r.status != 201 || j.value("sha256", "") != sha ||
      j.value("bytes", std::size_t{0}) != data.size()) {
    if (r.status == 201 && !j.contains("sha256")) return;  // the answer broke off: in doubt
    return unexpected(w, "upload of " + path + " to " + id, r);
  }
  std::lock_guard lock(ledger_.mu);
  ledger_.sandboxes[id].files[path] = sha;
  ++acked_;
}

void Kill9Loop::download(int w, const std::string& id, std::mt19937& rng) {
  std::string path, sha;
  {
    std::lock_guard lock(ledger_.mu);
    auto& files = ledger_.sandboxes[id].files;
    if (files.empty()) return;
    auto it = std::next(files.begin(), static_cast<long>(rng() % files.size()));
    path = it->first;
    sha = it->second;
  }
  HttpReply r = call(w, "GET", "/v1/sandboxes/" + id + "/files?path=" + path);
  if (r.status == 0) return;
  auto length = http::find_header(r.headers, "content-length");
  if (r.status == 200 && length && std::to_string(r.body.size()) != *length) return;  // cut off
  if (r.status != 200 || sha256_hex(r.body) != sha)
    return findings_.add(F::kLost, "cycle " + std::to_string(cycle_) + ": download of " + path +
                                       " from " + id + ": " + std::to_string(r.status) +
                                       (r.status == 200 ? " with other bytes" : " " + r.body));
  std::lock_guard lock(ledger_.mu);
  ledger_.sandboxes[id].reads[path] = sha;
  ++acked_;
}

void Kill9Loop::remove_file(int w, const std::string& id, std::mt19937& rng) {
  std::string path;
  {
    std::lock_guard lock(ledger_.mu);
    auto& files = ledger_.sandboxes[id].files;
    if (files.empty()) return;
    path = std::next(files.begin(), static_cast<long>(rng() % files.size()))->first;
  }
  HttpReply r = call(w, "DELETE", "/v1/sandboxes/" + id + "/files?path=" + path);
  std::lock_guard lock(ledger_.mu);
  SandboxFact& f = ledger_.sandboxes[id];
  if (r.status == 0) {
    f.files.erase(path);  // in doubt: neither kept nor gone for sure
    return;
  }
  if (r.status != 200) return unexpected(w, "file delete of " + path + " in " + id, r);
  f.files.erase(path);
  f.reads.erase(path);
  f.removed_files.insert(path);
  ++acked_;
}

// The same keyed request again: the same sandbox, never a second one.
void Kill9Loop::replay_create(int w, const std::string& id) {
  CreateFact f;
  {
    std::lock_guard lock(ledger_.mu);
    f = ledger_.creates[ledger_.sandboxes[id].tag];
  }
  if (f.key.empty()) return exec(w, id);
  HttpReply r = send_create(f, tcp_of(w));
  if (r.status == 0) return;
  if (r.status != 200 || r.json().value("id", "") != id) {
    findings_.add(r.status == 201 ? F::kDuplicate : F::kAnswer, "cycle " + std::to_string(cycle_) +
                                                                    ": replay of key " + f.key +
                                                                    " (" + id + ") -> " + brief(r));
    return;
  }
  ++acked_;
}

void Kill9Loop::disown(int w, const std::string& id) {
  auto& mine = ledger_.owned[w];
  mine.erase(std::remove(mine.begin(), mine.end(), id), mine.end());
}

void Kill9Loop::destroy(int w, const std::string& id) {
  HttpReply r = call(w, "DELETE", "/v1/sandboxes/" + id);
  const json j = r.json();
  std::lock_guard lock(ledger_.mu);
  SandboxFact& f = ledger_.sandboxes[id];
  disown(w, id);
  if (r.status == 0) {
    f.delete_unanswered = true;
    return;
  }
  if (r.status == 200 && j.value("state", "") == "cleaned" && j["residue"].empty()) {
    f.deleted = true;
    ++acked_;
    return;
  }
  if (r.status == 200 && j.value("state", "") == "failed") {
    f.delete_failed = true;
    findings_.add(F::kDestroyFailed, at(id) + ": " + tail_of(r.body, 600));
    return;
  }
  f.delete_failed = true;  // no longer ours to check
  unexpected(w, "DELETE " + id, r);
}

}  // namespace corral::testing::kill9
