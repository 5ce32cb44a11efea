// serve.e2b of the daemon config: the E2B-compatible facade (issue 17,
// docs/e2b.md, docs/config.md "e2b").
#pragma once

#include <map>
#include <string>

namespace corral::daemon {

struct E2bSettings {
  bool enabled = true;
  // Where the facade answers on the daemon's listeners: "/" + segments of
  // [a-z0-9._-], no trailing '/'. Control plane at <prefix>, envd at
  // <prefix>/envd.
  std::string prefix = "/e2b";
  // The network of a create that says nothing about it: "open", "none",
  // or the name of a network template. allow_internet_access: false is
  // always no network.
  std::string network = "open";
  // E2B template -> corral image, or "pool:<name>". Unmapped templates are
  // taken as a pool of that name, else an image of that name; "base" is
  // the daemon's default sandbox.
  std::map<std::string, std::string> templates;
};

}  // namespace corral::daemon
