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
  // E2B template -> what a create of it makes: an image, "pool:<name>",
  // or a corral create body (JSON: image, limits, secrets, network, ...).
  // Unmapped templates are taken as a pool of that name, else an image of
  // that name; "base" is the daemon's default sandbox.
  struct Template {
    std::string target;       // an image or "pool:<name>" (empty: create_json)
    std::string create_json;  // a create body (empty: target)
  };
  std::map<std::string, Template> templates;
};

}  // namespace corral::daemon
